use std::path::Path;

use serde_json::json;

use super::*;

fn scope() -> WorkflowScope {
    WorkflowScope {
        items: ["fetch".to_owned(), "writer".to_owned()].into(),
        tool_inputs: [(
            "fetch".to_owned(),
            json!({"type": "object", "properties": {"city": {"type": "string"}, "limit": {"type": "integer"}}, "required": ["city"], "additionalProperties": false}),
        )]
        .into(),
        settings: ["city".to_owned()].into(),
        secret_settings: ["hook_key".to_owned()].into(),
        packages: None,
    }
}

#[test]
fn qualified_targets_name_this_package_or_a_required_one() {
    let scope = WorkflowScope {
        packages: Some(("me".into(), ["notes".to_owned()].into())),
        ..scope()
    };
    let cases: &[(&str, &[&str])] = &[
        ("notes.list", &[]),
        ("me.fetch", &[]),
        ("me.nope", &["workflow-unknown-target"]),
        ("weather.get", &["workflow-unknown-target"]),
        ("fetch", &[]),
    ];
    for (target, want) in cases {
        let text = format!("description: d\nsteps:\n  - tool: {target}\n    with: {{city: x}}\n");
        let (_, d) = parse_workflow(&text, Path::new("w.yaml"), "w".parse().unwrap(), &scope);
        let codes: Vec<_> = d.iter().map(|d| d.code).collect();
        assert_eq!(codes, *want, "{target}: {d:?}");
    }
}

fn load(text: &str) -> (Option<Workflow>, Vec<Diagnostic>) {
    parse_workflow(text, Path::new("w.yaml"), "w".parse().unwrap(), &scope())
}

/// The table of the format before triggers became a list: every case keeps its verdict.
#[test]
fn table() {
    let cases: &[(&str, bool, &[&str])] = &[
        (
            "description: d\ntrigger: {schedule: '0 8 * * *'}\ninput: {type: object, properties: {city: {type: string}}}\nsteps:\n  - id: a\n    tool: fetch\n    arguments: {city: '{{ input.city }}'}\n  - agent: writer\n    task: 'Summarise {{ steps.a.output }}'\n  - approval: Send?\n  - wait: 10m\noutput: '{{ steps.a.output }}'\n",
            true,
            &[],
        ),
        ("description: d\nsteps: []\n", false, &["workflow-no-steps"]),
        (
            "description: d\nsteps: [{tool: nope}]\n",
            false,
            &["workflow-unknown-target"],
        ),
        ("description: d\nsteps: [{tool: other.tool}]\n", true, &[]),
        (
            "description: d\nsteps: [{tool: fetch, agent: writer}]\n",
            false,
            &["workflow-invalid-step"],
        ),
        (
            "description: d\ntrigger: {schedule: 'every day'}\nsteps: [{tool: other.t}]\n",
            false,
            &["workflow-invalid-schedule"],
        ),
        (
            "description: d\ntrigger: sometimes\nsteps: [{tool: other.t}]\n",
            false,
            &["workflow-invalid-trigger"],
        ),
        (
            "description: d\nsteps: [{tool: other.t, arguments: {x: '{{ steps.b.output }}'}}, {id: b, tool: other.t}]\n",
            false,
            &["workflow-bad-template"],
        ),
        (
            "description: d\ninput: {type: object, properties: {a: {}}}\nsteps: [{tool: other.t, arguments: {x: '{{ input.b }}'}}]\n",
            false,
            &["workflow-bad-template"],
        ),
        (
            "description: d\nsteps: [{id: a, tool: other.t}, {id: a, tool: other.t}]\n",
            false,
            &["workflow-invalid-step"],
        ),
        ("steps: [{tool: fetch}]\n", false, &["yaml-wrong-type"]),
    ];
    for (text, ok, want) in cases {
        let (w, d) = load(text);
        let codes: Vec<_> = d.iter().map(|d| d.code).collect();
        assert_eq!((w.is_some(), codes), (*ok, want.to_vec()), "{text}");
    }
}

/// The format of issue 14: each case is one file and the codes it must give, with lines.
#[test]
fn extended_format() {
    let head = "description: d\n";
    let cases: &[(&str, &[(&str, u32)])] = &[
        // Every trigger kind, in a list.
        (
            "trigger:\n  - manual\n  - schedule: {cron: '0 18 * * 1-5', timezone: Europe/Berlin, overlap: queue, catchup: latest}\n  - event: {name: note-added, if: \"event.tag == 'work'\"}\n  - webhook: {name: gh, secret: hook_key}\nsteps: [{tool: other.t}]\n",
            &[],
        ),
        (
            "trigger: {schedule: {cron: '0 8 * * *', timezone: Mars/Olympus}}\nsteps: [{tool: other.t}]\n",
            &[("workflow-invalid-timezone", 2)],
        ),
        (
            "trigger: {schedule: {cron: '61 8 * * *'}}\nsteps: [{tool: other.t}]\n",
            &[("workflow-invalid-schedule", 2)],
        ),
        (
            "trigger: {schedule: {cron: '0 8 * * *', when: now}}\nsteps: [{tool: other.t}]\n",
            &[("workflow-invalid-trigger", 2)],
        ),
        (
            "trigger: {webhook: {name: gh, secret: city}}\nsteps: [{tool: other.t}]\n",
            &[("workflow-webhook-secret", 2)],
        ),
        (
            "trigger: {webhook: {name: gh, secret: nope}}\nsteps: [{tool: other.t}]\n",
            &[("workflow-webhook-secret", 2)],
        ),
        (
            "trigger: {event: {name: e, if: 'event.x =='}}\nsteps: [{tool: other.t}]\n",
            &[("workflow-bad-condition", 2)],
        ),
        (
            "trigger: {event: {name: e, if: 'steps.a.output'}}\nsteps: [{tool: other.t}]\n",
            &[("workflow-bad-condition", 2)],
        ),
        (
            "trigger: []\nsteps: [{tool: other.t}]\n",
            &[("workflow-invalid-trigger", 2)],
        ),
        // Run-level fields.
        (
            "input: {type: object, properties: {day: {type: string}}}\nidempotency_key: 'report-{{ input.day }}'\nconcurrency: {key: '{{ settings.city }}', limit: 2}\ntimeout: 1h\nsteps: [{tool: other.t}]\n",
            &[],
        ),
        (
            "idempotency_key: '{{ steps.a.output }}'\nsteps: [{id: a, tool: other.t}]\n",
            &[("workflow-bad-template", 2)],
        ),
        (
            "concurrency: {limit: 0}\nsteps: [{tool: other.t}]\n",
            &[("workflow-invalid-concurrency", 2)],
        ),
        (
            "concurrency: {limit: 1, each: 2}\nsteps: [{tool: other.t}]\n",
            &[("yaml-wrong-type", 2)],
        ),
        // Steps: `with`, `if`, `timeout`, `retry`, approvals and waits.
        (
            "steps:\n  - id: get\n    tool: fetch\n    with: {city: '{{ settings.city }}', limit: 5}\n    timeout: 30s\n    retry: {max_attempts: 4, backoff: fixed, initial: 2s, max: 1m}\n  - id: ok\n    if: \"steps.get.status == 'ok' && !(steps.get.output.count < 1)\"\n    approval: {title: 'Send {{ steps.get.output.count }}?', show: '{{ steps.get.output }}', approvers: ['role(trusted)'], timeout: 1h, on_timeout: continue}\n  - wait: {for: 5m}\n  - wait: {until: '{{ steps.get.output.at }}'}\n  - wait: {event: paid, match: 'event.id == steps.get.output.id', timeout: 24h}\n    if: steps.ok.approved\noutput: {n: '{{ steps.get.output.count }}', run: '{{ run.id }}', by: '{{ trigger.kind }}'}\n",
            &[],
        ),
        (
            "steps:\n  - tool: fetch\n    with: {city: 3}\n",
            &[("workflow-invalid-arguments", 3)],
        ),
        (
            "steps:\n  - tool: fetch\n    with: {limit: 3}\n",
            &[("workflow-invalid-arguments", 3)],
        ),
        (
            "steps:\n  - tool: fetch\n    with: {city: '{{ input.c }}', extra: 1}\n",
            &[("workflow-invalid-arguments", 3)],
        ),
        (
            "steps:\n  - tool: fetch\n    with: {city: '{{ input.c }}'}\n",
            &[],
        ),
        (
            "steps:\n  - tool: fetch\n    with: {city: x}\n    arguments: {city: y}\n",
            &[("workflow-invalid-step", 3)],
        ),
        (
            "steps:\n  - id: a\n    tool: other.t\n  - tool: other.t\n    if: 'steps.b.output'\n",
            &[("workflow-bad-condition", 5)],
        ),
        (
            "steps:\n  - id: a\n    tool: other.t\n    if: 'steps.a.status'\n",
            &[("workflow-bad-condition", 3)],
        ),
        (
            "steps:\n  - tool: other.t\n    if: 'input.x = 1'\n",
            &[("workflow-bad-condition", 3)],
        ),
        (
            "steps:\n  - tool: other.t\n    retry: {max_attempts: 0}\n",
            &[("workflow-invalid-step", 3)],
        ),
        (
            "steps:\n  - tool: other.t\n    retry: {tries: 2}\n",
            &[("yaml-wrong-type", 4)],
        ),
        (
            "steps:\n  - tool: other.t\n    colour: red\n",
            &[("yaml-wrong-type", 4)],
        ),
        (
            "steps:\n  - approval: {title: ok, approvers: ['planet(mars)']}\n",
            &[("workflow-invalid-step", 3)],
        ),
        (
            "steps:\n  - approval: {title: ok, colour: red}\n",
            &[("workflow-invalid-step", 3)],
        ),
        (
            "steps:\n  - wait: {for: 5m, until: x}\n",
            &[("workflow-invalid-step", 3)],
        ),
        ("steps:\n  - wait: soon\n", &[("workflow-invalid-step", 3)]),
        (
            "steps:\n  - wait: {event: e, match: 'event.a == (1'}\n",
            &[("workflow-bad-condition", 3)],
        ),
        (
            "steps:\n  - tool: other.t\n    with: {a: '{{ settings.hook_key }}'}\n",
            &[("workflow-bad-template", 3)],
        ),
        (
            "steps:\n  - tool: other.t\n    with: {a: '{{ settings.nope }}'}\n",
            &[("workflow-bad-template", 3)],
        ),
        (
            "steps:\n  - tool: other.t\n    with: {a: '{{ run.started }}'}\n",
            &[("workflow-bad-template", 3)],
        ),
        (
            "steps:\n  - tool: other.t\n    with: {a: '{{ secrets.x }}'}\n",
            &[("workflow-bad-template", 3)],
        ),
        (
            "steps:\n  - tool: other.t\n    with: {a: '{{ input.x'}\n",
            &[("workflow-bad-template", 3)],
        ),
        (
            "steps:\n  - id: a\n    tool: other.t\n  - tool: other.t\n    with: {a: '{{ steps.a.result }}'}\n",
            &[("workflow-bad-template", 5)],
        ),
        (
            "steps:\n  - id: Bad\n    tool: other.t\n",
            &[("workflow-invalid-step", 3)],
        ),
    ];
    let mut failures = Vec::new();
    for (body, want) in cases {
        let text = format!("{head}{body}");
        let (w, d) = load(&text);
        let got: Vec<(&str, u32)> = d.iter().map(|d| (d.code, d.line.unwrap_or(0))).collect();
        // Lines are the file's: the description is line 1.
        if got != *want || w.is_some() != want.is_empty() {
            failures.push(format!("{body:?}\n  got {got:?}\n  {d:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn parsed_shapes() {
    let text = "description: d\ntrigger:\n  - schedule: '0 8 * * *'\n  - event: e\nsteps:\n  - tool: fetch\n    arguments: {city: x}\n  - approval: Send?\n  - wait: 90s\n  - wait: {event: paid, timeout: 1h}\n";
    let (w, d) = load(text);
    assert!(d.is_empty(), "{d:#?}");
    let w = w.unwrap();
    assert_eq!(
        w.triggers,
        [
            Trigger::Schedule(Schedule {
                cron: "0 8 * * *".into(),
                timezone: "UTC".into(),
                overlap: Overlap::Skip,
                catchup: Catchup::None,
            }),
            Trigger::Event(EventTrigger {
                name: "e".into(),
                condition: None
            }),
        ]
    );
    let ids: Vec<&str> = w.steps.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["step-1", "step-2", "step-3", "step-4"]);
    assert_eq!(
        w.steps[0].action,
        StepAction::Tool {
            name: "fetch".into(),
            arguments: json!({"city": "x"})
        }
    );
    assert!(
        matches!(&w.steps[1].action, StepAction::Approval { title, on_timeout: OnTimeout::Fail, .. } if title == "Send?")
    );
    assert_eq!(
        w.steps[2].action,
        StepAction::Wait(WaitFor::For(crate::common::Seconds(
            std::time::Duration::from_secs(90)
        )))
    );
    assert!(
        matches!(&w.steps[3].action, StepAction::Wait(WaitFor::Event { name, matches: None, timeout: Some(_) }) if name == "paid")
    );
    // The pinned form round-trips through JSON.
    let json = serde_json::to_value(&w).unwrap();
    let back: Workflow = serde_json::from_value(json).unwrap();
    assert_eq!(back, w);
}
