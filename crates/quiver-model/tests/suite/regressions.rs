//! The counterexamples the generated tests found, shrunk by hand from proptest's minimal cases
//! to the smallest catalog and conversation that show them, one row each. A row whose class
//! is in the known list must still show it (so the lead sees when a fix lands and removes the
//! entry); once removed, the row must hold. Every row must show nothing else. Every MCP row
//! runs over stdio and again over HTTP, with the client of the same era and turn marking.

use quiver_model::world::{
    Approval, Caller, Category, NameForm, Op, Package, Role, Script, Target, Tool, World,
};

use super::check::{Front, is_known, known};
use super::generated::run_through;
use super::harness::Run;
use super::small_worlds::{
    agent_naming_a_private_tool, empty_tools_list, exposed_skill_tool, fork_into_own_agent,
    fork_into_p1, one_tool, owner, package, preapproved_always, required_section,
    skill_forking_with_its_own_tool, skill_removing, skills_with_scripts, step_t0, tool,
    workflow_of,
};

/// One row: a name, the front, the case, and the class it showed (`None`: the case holds).
#[derive(Clone)]
struct Row {
    name: &'static str,
    front: Front,
    world: World,
    caller: Caller,
    ops: Vec<Op>,
    class: Option<&'static str>,
}

fn run(row: &Row) -> Run {
    run_through(row.front, &row.world, row.caller, &row.ops)
}

/// The HTTP client of the same era and turn marking as an MCP row's stdio client.
fn over_http(front: Front) -> Option<Front> {
    match front {
        Front::McpTurnIds => Some(Front::McpHttpSession),
        Front::McpNoTurnIds => Some(Front::McpHttpStateless),
        _ => None,
    }
}

/// The rows, and every MCP row again over HTTP.
fn rows_on_every_transport() -> Vec<Row> {
    let rows = rows();
    let http: Vec<Row> = rows
        .iter()
        .filter_map(|row| {
            let front = over_http(row.front)?;
            Some(Row {
                front,
                ..row.clone()
            })
        })
        .collect();
    rows.into_iter().chain(http).collect()
}

fn t0(form: NameForm) -> Op {
    Op::Call(Target::Tool(0, 0), form)
}

fn call_w0() -> Op {
    Op::Call(Target::Workflow(0, 0), NameForm::Wire)
}

fn script(id: &str, script: Script) -> Op {
    Op::RunScript(id.to_owned(), script)
}

fn rows() -> Vec<Row> {
    let read = |id: &str| Op::ReadSkill(id.to_owned());
    vec![
        Row {
            name: "item 1: a fork into another package's private agent is unknown",
            front: Front::Runtime,
            world: fork_into_p1(false),
            caller: owner(),
            ops: vec![read("p0")],
            class: Some("fork-into-private-agent"),
        },
        Row {
            name: "item 1: a fork into another package's exposed agent asks that package's consent",
            front: Front::Runtime,
            world: fork_into_p1(true),
            caller: owner(),
            ops: vec![Op::ConsentAnswer(false), read("p0")],
            class: Some("fork-without-consent"),
        },
        Row {
            name: "item 1, over MCP: the same fork into a private agent",
            front: Front::McpTurnIds,
            world: fork_into_p1(false),
            caller: owner(),
            ops: vec![read("p0")],
            class: Some("fork-into-private-agent"),
        },
        Row {
            name: "new: a skill's written, empty `tools: []` unlocks none of its own tools",
            front: Front::Runtime,
            world: empty_tools_list(),
            caller: owner(),
            ops: vec![read("p0/s0")],
            class: Some("empty-tools-list-unlocks-all"),
        },
        Row {
            name: "item 1, in chat: the agent loop does not run another package's private agent for a fork",
            front: Front::Chat,
            world: fork_into_p1(false),
            caller: owner(),
            ops: vec![read("p0")],
            class: Some("fork-into-private-agent"),
        },
        Row {
            name: "item 2 (new, the checker's): a fork's child in chat is offered what its skill, active there, unlocks",
            front: Front::Chat,
            world: skill_forking_with_its_own_tool(),
            caller: owner(),
            ops: vec![read("p0/s0")],
            class: None,
        },
        Row {
            name: "item 2, in chat: an agent naming another package's private tool is not sent it",
            front: Front::Chat,
            world: agent_naming_a_private_tool(),
            caller: owner(),
            ops: vec![Op::Call(Target::Agent(0, 0), NameForm::Wire)],
            class: Some("sub-agent-offered-private"),
        },
        Row {
            name: "item 1's sibling: a workflow step naming another package's private tool does not run it",
            front: Front::Runtime,
            world: {
                let mut w = workflow_of(vec![step_t0(1)]);
                w.packages[1].tools[0].expose = false;
                w
            },
            caller: owner(),
            ops: vec![call_w0()],
            class: None,
        },
        Row {
            name: "item 2: read_skill of the package's skill does not list another skill's tool",
            front: Front::Runtime,
            world: exposed_skill_tool(true),
            caller: owner(),
            ops: vec![read("p0")],
            class: Some("read-skill-lists-scoped-tool"),
        },
        Row {
            name: "item 2, over MCP: the same listing",
            front: Front::McpNoTurnIds,
            world: exposed_skill_tool(true),
            caller: owner(),
            ops: vec![read("p0")],
            class: Some("read-skill-lists-scoped-tool"),
        },
        Row {
            name: "item 2 (new): load_tool does not load a hidden private tool into the list",
            front: Front::Runtime,
            world: one_tool(Tool {
                expose: false,
                hidden: true,
                ..tool()
            }),
            caller: owner(),
            ops: vec![Op::LoadTool(Target::Tool(0, 0), NameForm::Wire)],
            class: Some("load-tool-loads-private"),
        },
        Row {
            name: "item 2 (new): read_skill does not list what the skill's disallowed-tools removes",
            front: Front::Runtime,
            world: World {
                packages: vec![Package {
                    tools: vec![tool()],
                    root_skill: Some(skill_removing("t0")),
                    ..package()
                }],
            },
            caller: owner(),
            ops: vec![read("p0")],
            class: Some("read-skill-lists-disallowed"),
        },
        Row {
            name: "item 3: without turn ids a pre-approval covers at most the next call",
            front: Front::McpNoTurnIds,
            world: preapproved_always(),
            caller: owner(),
            ops: vec![read("p0"), t0(NameForm::Wire), t0(NameForm::Wire)],
            class: Some("preapproval-outlived-turn"),
        },
        Row {
            name: "item 3: with turn ids the pre-approval ends with its turn",
            front: Front::McpTurnIds,
            world: preapproved_always(),
            caller: owner(),
            ops: vec![
                read("p0"),
                t0(NameForm::Wire),
                Op::NewTurn,
                t0(NameForm::Wire),
            ],
            class: None,
        },
        Row {
            name: "item 3: through the runtime API the pre-approval ends with its turn",
            front: Front::Runtime,
            world: preapproved_always(),
            caller: owner(),
            ops: vec![
                read("p0"),
                t0(NameForm::Wire),
                Op::NewTurn,
                t0(NameForm::Wire),
            ],
            class: None,
        },
        Row {
            name: "item 4: a required prompt section reaches MCP clients",
            front: Front::McpTurnIds,
            world: required_section(),
            caller: owner(),
            ops: vec![read("p0")],
            class: Some("required-section-missing"),
        },
        Row {
            name: "new: over the 2026-07-28 era a call that asks a question leaves one call record",
            front: Front::McpNoTurnIds,
            world: one_tool(tool()),
            caller: owner(),
            ops: vec![t0(NameForm::Wire)],
            class: Some("pending-round-recorded-apart"),
        },
        Row {
            name: "item 11: a call by qualified name keeps its secret out of the audit",
            front: Front::Runtime,
            world: one_tool(Tool {
                secret: true,
                ..tool()
            }),
            caller: owner(),
            ops: vec![t0(NameForm::Qualified)],
            class: Some("secret-in-audit-qualified-name"),
        },
        Row {
            name: "item 14: load_tool accepts a qualified name",
            front: Front::Runtime,
            world: one_tool(tool()),
            caller: owner(),
            ops: vec![Op::LoadTool(Target::Tool(0, 0), NameForm::Qualified)],
            class: Some("load-tool-qualified-name"),
        },
        Row {
            name: "new: an anonymous sender's dangerous call is not answered by the conversation's person",
            front: Front::Runtime,
            world: one_tool(Tool {
                dangerous: true,
                ..tool()
            }),
            caller: Caller {
                role: Role::Anonymous,
                ..owner()
            },
            ops: vec![t0(NameForm::Wire)],
            class: Some("anonymous-answers-person-card"),
        },
        Row {
            name: "item 5's sibling (new): a run an anonymous sender starts parks on its dangerous step for a named person, who answers it from another process",
            front: Front::Runtime,
            world: workflow_of(vec![step_t0(0)]),
            caller: Caller {
                role: Role::Anonymous,
                ..owner()
            },
            ops: vec![call_w0(), Op::AnswerRun(true)],
            class: None,
        },
        Row {
            name: "item 5: a triggered run parks on each question, and the owner's answers in another process finish it",
            front: Front::Runtime,
            world: workflow_of(vec![step_t0(1), step_t0(0)]),
            caller: owner(),
            ops: vec![Op::TriggerRun(0), Op::AnswerRun(true), Op::AnswerRun(true)],
            class: None,
        },
        Row {
            name: "item 5's sibling (found by the generated cases): a yes given from another process to a run's `once` step holds for the run's next call of that tool",
            front: Front::Runtime,
            world: {
                let mut w = workflow_of(vec![step_t0(0), step_t0(0)]);
                w.packages[0].tools[0] = Tool {
                    expose: false,
                    category: Category::Action,
                    approval: Approval::Once,
                    ..tool()
                };
                w
            },
            caller: owner(),
            ops: vec![Op::TriggerRun(0), Op::AnswerRun(true)],
            class: None,
        },
        Row {
            name: "a fork into the package's own agent refused by the stop is locked for the rest of the turn, as a call refused by the stop is (found by the generated cases)",
            front: Front::Runtime,
            world: fork_into_own_agent(),
            caller: owner(),
            ops: vec![
                Op::EmergencyStop(true),
                read("p0"),
                Op::EmergencyStop(false),
                read("p0"),
            ],
            class: None,
        },
        Row {
            name: "item 5, over MCP: a run's question is asked of the client waiting on its call (the 2026-07-28 era too)",
            front: Front::McpNoTurnIds,
            world: workflow_of(vec![step_t0(1)]),
            caller: owner(),
            ops: vec![call_w0(), Op::AnswerRun(true)],
            class: None,
        },
        Row {
            name: "item 1 (new, the model's): a fork into another package's agent is removed by the turn's `disallowed-tools`",
            front: Front::Runtime,
            world: {
                let mut w = fork_into_p1(true);
                w.packages[1].skills = vec![skill_removing("a0")];
                w
            },
            caller: owner(),
            ops: vec![read("p1/s0"), read("p0")],
            class: None,
        },
        Row {
            name: "item 1: a skill's script runs from an active skill only, with its package's consent",
            front: Front::Runtime,
            world: skills_with_scripts(),
            caller: owner(),
            ops: vec![
                script("p0", Script::Own),
                read("p0"),
                script("p0", Script::Outside(1)),
                script("p0", Script::Own),
            ],
            class: None,
        },
        Row {
            name: "item 3's sibling (new): without turn ids a skill read again renews its pre-approval for the next call",
            front: Front::McpNoTurnIds,
            world: preapproved_always(),
            caller: owner(),
            ops: vec![
                Op::ApprovalAnswer(false),
                read("p0"),
                read("p0"),
                t0(NameForm::Wire),
            ],
            class: Some("preapproval-not-renewed"),
        },
        Row {
            name: "item 1, over MCP: the same script",
            front: Front::McpTurnIds,
            world: skills_with_scripts(),
            caller: owner(),
            ops: vec![
                script("p0", Script::Own),
                read("p0"),
                script("p0", Script::Own),
            ],
            class: None,
        },
    ]
}

#[test]
fn shrunk_counterexamples_stay_known_until_fixed_and_hold_after() {
    let mut failures = Vec::new();
    for row in rows_on_every_transport() {
        let run = run(&row);
        let unknown: Vec<String> = run
            .violations
            .iter()
            .filter(|v| known(row.front, v).is_none())
            .map(ToString::to_string)
            .collect();
        let shown = run
            .violations
            .iter()
            .any(|v| Some(v.tag.as_str()) == row.class);
        if !unknown.is_empty() {
            failures.push(format!(
                "{} ({:?}): {}",
                row.name,
                row.front,
                unknown.join("; ")
            ));
        }
        if let Some(class) = row.class
            && is_known(row.front, class)
            && !shown
        {
            failures.push(format!(
                "{} ({:?}): `{class}` no longer shows: its fix landed; remove it from the known list",
                row.name, row.front
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn over_the_2026_era_a_question_inside_a_fork_does_not_run_the_fork_again() {
    // `p0`'s skill forks into its own agent `a0`, which calls its package's private `t0` (no
    // question) and then `p1.t0` (a consent question, `input_required` in this era).
    let world = fork_into_own_agent();
    for front in [Front::McpNoTurnIds, Front::McpHttpStateless] {
        let run = run_through(front, &world, owner(), &[Op::ReadSkill("p0".into())]);
        let own = run.ran.iter().filter(|t| *t == "p0.t0").count();
        assert_eq!(
            own, 1,
            "{front:?}: the fork's own call ran once: {:?}",
            run.ran
        );
        assert!(run.violations.is_empty(), "{front:?}: {:?}", run.violations);
    }
}
