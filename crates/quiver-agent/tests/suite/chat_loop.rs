//! The loop end to end over the real runtime: what is offered each request, tool_search then
//! a call, consent, a refused dangerous call, the JSON action format, the retry rule, the step
//! limit and compaction.

use quiver_agent::config::ToolMode;
use quiver_agent::fake::{Api, Move};
use quiver_agent::{ChatSession, Quiet};
use quiver_runtime::CallStatus;
use quiver_runtime::approver::{Answer, Question};
use serde_json::{Value, json};

use super::common::*;

const META: [&str; 6] = [
    "read_skill",
    "tool_search",
    "load_tool",
    "ask_user",
    "run_skill_script",
    "tool_output",
];

fn messages(body: &Value) -> Vec<Value> {
    body["messages"].as_array().unwrap().clone()
}

#[test]
fn tool_search_then_a_call_with_the_exact_tools_each_request() {
    for api in [Api::OpenAi, Api::Anthropic] {
        let h = harness(api, |_| {});
        h.server.push([
            Move::call("tool_search", json!({"query": "北京天气"})),
            Move::call("weather__forecast", json!({"city": "北京"})),
            Move::text("北京明天晴，25 度。"),
        ]);
        h.person.answer(&[Answer::AllowForSession]);
        let s = session(&h);
        let (provider, mut options) = h.providers.for_agent(None, None).unwrap();
        options.count_tokens = true;
        let mut chat = ChatSession::new(&h.runtime, provider, options, &s, owner())
            .with_person(h.person.clone());
        let report = chat.send("北京明天多少度", &mut Quiet).unwrap();
        assert_eq!(report.reply, "北京明天晴，25 度。");
        let statuses: Vec<CallStatus> = report.calls.iter().map(|c| c.status).collect();
        assert_eq!(
            statuses,
            [CallStatus::Ok, CallStatus::Ok],
            "{:#?}",
            report.calls
        );
        assert_eq!(
            *h.calls.lock().unwrap(),
            [("weather.forecast".to_owned(), json!({"city": "北京"}))]
        );
        let requests = h.server.requests();
        assert_eq!(requests.len(), 3);
        // Deferred tools are absent until searched.
        assert_eq!(tool_names(&requests[0].body), META, "{api:?}");
        let second = tool_names(&requests[1].body);
        assert_eq!(second[..6], META);
        assert_eq!(second[6..], ["weather__forecast"], "{api:?}");
        let system = match api {
            Api::OpenAi => requests[0].body["messages"][0]["content"]
                .as_str()
                .unwrap()
                .to_owned(),
            Api::Anthropic => requests[0].body["system"].as_str().unwrap().to_owned(),
        };
        assert!(
            system.contains("Do not call a tool when none is needed"),
            "{system}"
        );
        assert!(
            system.contains("天气预报 Weather forecasts"),
            "the catalog: {system}"
        );
        // One consent question for the whole package, none for the search.
        let cards = h.person.cards();
        assert_eq!(cards.len(), 1);
        assert_eq!(
            (cards[0].question, cards[0].package.as_str()),
            (Question::Consent, "weather")
        );
        assert_eq!(report.usage.input_tokens, 300);
        assert!(report.prompt_tokens > 100, "{}", report.prompt_tokens);
        // The counted turn is in the audit against the eager baseline (every exposed tool's
        // definition, no meta-tools), which the console charts.
        let turns: Vec<_> = h
            .runtime
            .session_audit(&s, 100)
            .unwrap()
            .into_iter()
            .filter(|r| r.entry.kind.as_str() == quiver_runtime::TURN_TOKENS_KIND)
            .collect();
        assert_eq!(turns.len(), 1, "{turns:#?}");
        let detail = turns[0].entry.detail.clone().unwrap();
        assert_eq!(detail["prompt_tokens"], json!(report.prompt_tokens));
        let eager = detail["eager_tokens"].as_u64().unwrap();
        assert!(
            eager > 0 && eager != report.prompt_tokens as u64,
            "{detail}"
        );
        if api == Api::Anthropic {
            let roles: Vec<String> = messages(&requests[2].body)
                .iter()
                .map(|m| m["role"].as_str().unwrap().to_owned())
                .collect();
            assert_eq!(roles, ["user", "assistant", "user", "assistant", "user"]);
            assert_eq!(
                requests[2].body["messages"][4]["content"][0]["type"],
                "tool_result"
            );
        }
    }
}

#[test]
fn a_refused_dangerous_call_and_a_refused_consent_inside_a_chat() {
    let h = harness(Api::OpenAi, |_| {});
    h.server.push([
        Move::call("group-admin__kick_member", json!({"user": "42"})),
        Move::call("group-admin__kick_member", json!({"user": "42"})),
        Move::text("没有权限踢人。"),
        Move::call("notes__add_note", json!({"text": "x"})),
        Move::text("好的，不记了。"),
    ]);
    // Consent yes, then the person refuses the dangerous call.
    h.person.answer(&[Answer::AllowForSession, Answer::Deny]);
    let s = group_session(&h);
    let mut chat = chat(&h, &s);
    let report = chat.send("把 42 踢出群", &mut Quiet).unwrap();
    let statuses: Vec<CallStatus> = report.calls.iter().map(|c| c.status).collect();
    assert_eq!(statuses, [CallStatus::Refused, CallStatus::Refused]);
    assert!(
        report.calls[0].result["error"]
            .as_str()
            .unwrap()
            .contains("do not retry")
    );
    assert!(h.calls.lock().unwrap().is_empty(), "nothing ran");
    let cards = h.person.cards();
    assert_eq!(
        cards.len(),
        2,
        "the retry in the same turn is refused without asking"
    );
    assert!(cards[1].needs_person);
    assert_eq!(cards[1].risk_categories, ["member"]);
    let last = h.server.requests()[2].body.clone();
    let tool_message = messages(&last)
        .into_iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert!(
        tool_message["content"]
            .as_str()
            .unwrap()
            .contains("refused"),
        "{tool_message}"
    );
    assert_eq!(report.reply, "没有权限踢人。");

    h.person.answer(&[Answer::Deny]);
    let report = chat.send("记一下 x", &mut Quiet).unwrap();
    assert_eq!(report.calls[0].status, CallStatus::Refused);
    assert_eq!(h.person.cards()[2].question, Question::Consent);
    assert!(h.calls.lock().unwrap().is_empty());
}

#[test]
fn the_json_action_format_with_feedback_on_malformed_actions() {
    let h = harness_with(Api::OpenAi, ToolMode::Json, |_| {});
    h.server.push([
        Move::text(r#"{"tool": "tool_search", "args": "#),
        Move::text(r#"{"thought": "search", "tool": "tool_search", "args": {"query": "天气"}}"#),
        Move::text("```json\n{\"thought\": \"open it\", \"skill\": \"weather\"}\n```"),
        Move::text("北京明天晴。"),
    ]);
    let s = session(&h);
    let mut chat = chat(&h, &s);
    let report = chat.send("北京明天天气", &mut Quiet).unwrap();
    assert_eq!(report.reply, "北京明天晴。");
    assert_eq!(report.malformed_actions, 1);
    let names: Vec<&str> = report.calls.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["tool_search", "read_skill"]);
    assert_eq!(report.calls[1].arguments, json!({"id": "weather"}));
    assert_eq!(report.calls[1].result["status"], "activated");
    let requests = h.server.requests();
    assert!(
        requests.iter().all(|r| r.body.get("tools").is_none()),
        "no native tools"
    );
    let system = requests[0].body["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains("reply with exactly one JSON object") && system.contains("- tool_search:"),
        "{system}"
    );
    let feedback = quiver_agent::fake::last_user_text(&requests[1].body);
    assert!(
        feedback.contains("could not be read as an action: the JSON does not parse"),
        "{feedback}"
    );
    let result = quiver_agent::fake::last_user_text(&requests[3].body);
    assert!(
        result.starts_with("Result of `read_skill`:") && result.contains("weather__forecast"),
        "{result}"
    );
}

#[test]
fn invalid_arguments_get_three_retries_then_the_model_must_ask() {
    let h = harness(Api::OpenAi, |_| {});
    h.server
        .push((0..4).map(|_| Move::call("notes__add_note", json!({"text": ""}))));
    h.server.push([Move::text("这条笔记要写什么？")]);
    let s = session(&h);
    let report = chat(&h, &s).send("记一条笔记", &mut Quiet).unwrap();
    assert_eq!(report.calls.len(), 4);
    assert!(report.calls.iter().all(|c| c.status == CallStatus::Invalid));
    assert!(
        report.calls[3].result["error"]
            .as_str()
            .unwrap()
            .contains("stop and ask the user")
    );
    let choices: Vec<Value> = h
        .server
        .requests()
        .iter()
        .map(|r| r.body["tool_choice"].clone())
        .collect();
    assert_eq!(
        choices,
        [
            json!("auto"),
            json!("auto"),
            json!("auto"),
            json!("auto"),
            json!("none")
        ]
    );
    assert_eq!(report.reply, "这条笔记要写什么？");
}

#[test]
fn the_step_limit_ends_a_turn() {
    let h = harness(Api::OpenAi, |c| c.limits.max_steps = 2);
    h.server
        .push((0..5).map(|_| Move::call("tool_search", json!({"query": "x"}))));
    let s = session(&h);
    let report = chat(&h, &s).send("loop", &mut Quiet).unwrap();
    assert!(report.stopped);
    assert_eq!(report.steps, 2);
    assert_eq!(h.server.requests().len(), 2);
    assert!(report.reply.contains("stopped after 2 steps"));
}

#[test]
fn a_deadline_starts_no_model_request_after_it() {
    let h = harness(Api::OpenAi, |_| {});
    h.server.push([
        Move::call("tool_search", json!({"query": "x"})),
        Move::text("done"),
    ]);
    let s = session(&h);
    let (provider, mut options) = h.providers.for_agent(None, None).unwrap();
    options.deadline = Some(std::time::Instant::now());
    let mut chat = ChatSession::new(&h.runtime, provider.clone(), options.clone(), &s, owner());
    let error = chat.send("go", &mut Quiet).unwrap_err();
    assert!(
        matches!(error, quiver_agent::AgentError::OutOfTime { steps: 0, .. }),
        "{error}"
    );
    assert_eq!(h.server.requests().len(), 0);
    // Time enough: the turn runs as without one.
    options.deadline = Some(std::time::Instant::now() + std::time::Duration::from_secs(60));
    let mut chat = ChatSession::new(&h.runtime, provider, options, &s, owner());
    assert_eq!(chat.send("go", &mut Quiet).unwrap().reply, "done");
    assert_eq!(h.server.requests().len(), 2);
}

#[test]
fn no_tool_for_a_greeting_and_compaction_ends_active_skills() {
    let h = harness(Api::OpenAi, |c| c.limits.context_chars = 400);
    h.server.push([
        Move::call("read_skill", json!({"id": "weather"})),
        Move::text(&"天气很好。".repeat(60)),
        Move::text("你好！"),
    ]);
    let s = session(&h);
    let mut chat: ChatSession<'_> = chat(&h, &s);
    let first = chat.send("讲讲天气", &mut Quiet).unwrap();
    assert!(!first.compacted);
    assert_eq!(h.store.active_skills(&s).unwrap(), ["weather"]);
    let second = chat.send("你好", &mut Quiet).unwrap();
    assert!(second.compacted);
    assert!(second.calls.is_empty());
    assert!(
        h.store.active_skills(&s).unwrap().is_empty(),
        "compaction ends skills"
    );
    let sent = messages(&h.server.requests()[2].body);
    assert!(
        sent[1]["content"]
            .as_str()
            .unwrap()
            .starts_with("[Earlier messages were removed"),
        "{sent:?}"
    );
    assert_eq!(sent.last().unwrap()["content"], "你好");
    // /reset forgets the conversation and ends skills too.
    assert!(chat.reset().unwrap().is_empty());
    assert!(chat.conversation().is_empty());
}

/// Issue 12 defect 8: "already active" only where this conversation holds the instructions;
/// a new chat on the same session (`quiver chat -m --session S` in the next process) gets
/// them again.
#[test]
fn an_active_skill_is_read_again_in_full_by_a_chat_that_never_saw_it() {
    let h = harness(Api::OpenAi, |_| {});
    let read = || Move::call("read_skill", json!({"id": "weather"}));
    h.server.push([
        read(),
        Move::text("ok"),
        read(),
        Move::text("ok"),
        read(),
        Move::text("ok"),
    ]);
    let s = session(&h);
    let status = |report: &quiver_agent::TurnReport| {
        let result = &report.calls[0].result;
        (
            result["status"].as_str().unwrap().to_owned(),
            result.get("instructions").is_some(),
        )
    };
    let mut first = chat(&h, &s);
    let one = first.send("天气", &mut Quiet).unwrap();
    assert_eq!(status(&one), ("activated".to_owned(), true));
    let two = first.send("再看看", &mut Quiet).unwrap();
    assert!(
        status(&two).0.starts_with("already active"),
        "{:?}",
        status(&two)
    );
    assert!(!status(&two).1);
    let mut next = chat(&h, &s);
    let three = next.send("天气", &mut Quiet).unwrap();
    assert_eq!(status(&three), ("active".to_owned(), true));
}
