//! Both APIs over real HTTP: request shapes, streaming reassembly, lenient parsing, retries,
//! timeouts and clear errors.

use std::time::{Duration, Instant};

use quiver_agent::config::ProviderKind;
use quiver_agent::fake::{Api, FakeServer, Move};
use quiver_agent::provider::{self, ChatRequest, Message, ProviderError, ToolChoice, ToolSpec};
use serde_json::{Value, json};

use super::common::provider_config;

fn request(stream: bool) -> ChatRequest {
    ChatRequest {
        model: "fake-model".into(),
        system: "be brief".into(),
        messages: vec![Message::User {
            text: "北京和上海明天多少度".into(),
        }],
        tools: vec![ToolSpec {
            name: "weather__forecast".into(),
            description: "forecast".into(),
            input_schema: json!({"type": "object", "properties": {"city": {"type": "string"}}}),
        }],
        tool_choice: ToolChoice::Auto,
        stream,
        ..ChatRequest::default()
    }
}

fn two_cities() -> Move {
    Move::Reply {
        text: "查一下。".into(),
        calls: vec![
            ("weather__forecast".into(), json!({"city": "北京"})),
            ("weather__forecast".into(), json!({"city": "上海"})),
        ],
        usage: (321, 45),
    }
}

#[test]
fn both_apis_stream_and_not_with_parallel_calls() {
    for api in [Api::OpenAi, Api::Anthropic] {
        for stream in [false, true] {
            let server = FakeServer::start(api).unwrap();
            server.push([two_cities()]);
            let mut config = provider_config(&server, api);
            // The key comes from the variable the configuration names (PATH is always set).
            config.api_key_env = Some("PATH".into());
            let key = std::env::var("PATH").unwrap();
            let p = provider::from_config("fake", &config).unwrap();
            let mut streamed = String::new();
            let reply = p
                .complete(&request(stream), &mut |d| streamed.push_str(d))
                .unwrap();
            let label = format!("{api:?} stream={stream}");
            assert_eq!(reply.text, "查一下。", "{label}");
            assert_eq!(reply.tool_calls.len(), 2, "{label}");
            assert_eq!(reply.tool_calls[0].name, "weather__forecast");
            assert_eq!(
                reply.tool_calls[1].arguments,
                json!({"city": "上海"}),
                "{label}"
            );
            assert_ne!(reply.tool_calls[0].id, reply.tool_calls[1].id);
            assert_eq!(
                (reply.usage.input_tokens, reply.usage.output_tokens),
                (321, 45),
                "{label}"
            );
            if stream {
                assert_eq!(streamed, "查一下。", "{label}: text arrives in pieces");
            }
            let sent = &server.requests()[0];
            let body = &sent.body;
            assert_eq!(body["stream"], json!(stream));
            match api {
                Api::OpenAi => {
                    assert_eq!(sent.path, "/v1/chat/completions");
                    assert_eq!(sent.headers["authorization"], format!("Bearer {key}"));
                    assert_eq!(
                        body["messages"][0],
                        json!({"role": "system", "content": "be brief"})
                    );
                    assert_eq!(body["tools"][0]["function"]["name"], "weather__forecast");
                    assert_eq!(body["tool_choice"], "auto");
                    assert_eq!(body["parallel_tool_calls"], true);
                    assert_eq!(body.get("stream_options").is_some(), stream);
                }
                Api::Anthropic => {
                    assert_eq!(sent.path, "/v1/messages");
                    assert_eq!(sent.headers["x-api-key"], key);
                    assert_eq!(sent.headers["anthropic-version"], "2023-06-01");
                    assert_eq!(body["system"], "be brief");
                    assert_eq!(body["tools"][0]["input_schema"]["type"], "object");
                    assert_eq!(body["tool_choice"], json!({"type": "auto"}));
                    assert!(body["max_tokens"].as_u64().unwrap() > 0);
                }
            }
        }
    }
}

fn complete(
    api: Api,
    moves: Vec<Move>,
    stream: bool,
) -> Result<provider::ModelReply, ProviderError> {
    let server = FakeServer::start(api).unwrap();
    server.push(moves);
    let p = provider::from_config("fake", &provider_config(&server, api)).unwrap();
    p.complete(&request(stream), &mut |_| {})
}

#[test]
fn fields_compatible_servers_get_wrong_do_not_break_parsing() {
    type Case = (
        Api,
        Move,
        bool,
        &'static str,
        Vec<(&'static str, Value)>,
        (u64, u64),
    );
    let cases: Vec<Case> = vec![
        // Nulls everywhere, unknown fields, arguments as an object, usage as strings.
        (
            Api::OpenAi,
            Move::Raw(r#"{"id":null,"object":"chat.completion","created":null,"choices":[{"index":null,"message":{"role":"assistant","content":null,"reasoning_content":"…","tool_calls":[{"id":null,"type":null,"function":{"name":"weather__forecast","arguments":{"city":"北京"}}}]},"finish_reason":"tool_calls","logprobs":null}],"usage":{"prompt_tokens":"12","completion_tokens":null,"prompt_tokens_details":{"cached_tokens":0}}}"#.into()),
            false,
            "",
            vec![("weather__forecast", json!({"city": "北京"}))],
            (12, 0),
        ),
        // Content as a list of parts, no usage at all.
        (
            Api::OpenAi,
            Move::Raw(r#"{"choices":[{"message":{"content":[{"type":"text","text":"你"},{"type":"text","text":"好"}]}}]}"#.into()),
            false,
            "你好",
            vec![],
            (0, 0),
        ),
        // A stream without indexes or ids, empty lines of data, usage in no chunk, no [DONE].
        (
            Api::OpenAi,
            Move::RawStream(vec![
                r#"{"choices":[{"delta":{"role":"assistant","content":null}}]}"#.into(),
                r#"{"choices":[{"delta":{"tool_calls":[{"function":{"name":"weather__forecast","arguments":"{\"ci"}}]}}]}"#.into(),
                r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"ty\": \"北京\"}"}}]}}]}"#.into(),
                r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}],"usage":null}"#.into(),
            ]),
            true,
            "",
            vec![("weather__forecast", json!({"city": "北京"}))],
            (0, 0),
        ),
        // Anthropic: null text, input as a JSON string, an unknown block type.
        (
            Api::Anthropic,
            Move::Raw(r#"{"type":"message","content":[{"type":"thinking","thinking":"…"},{"type":"text","text":null},{"type":"tool_use","id":null,"name":"weather__forecast","input":"{\"city\":\"北京\"}"}],"stop_reason":null,"usage":{"input_tokens":7}}"#.into()),
            false,
            "",
            vec![("weather__forecast", json!({"city": "北京"}))],
            (7, 0),
        ),
        // Anthropic stream: events without `event:` names, no indexes on deltas, pings.
        (
            Api::Anthropic,
            Move::RawStream(vec![
                r#"{"type":"message_start","message":{"usage":{"input_tokens":9,"output_tokens":null}}}"#.into(),
                r#"{"type":"ping"}"#.into(),
                r#"{"type":"content_block_start","content_block":{"type":"text","text":"好"}}"#.into(),
                r#"{"type":"content_block_delta","delta":{"type":"text_delta","text":"的"}}"#.into(),
                r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}"#.into(),
            ]),
            true,
            "好的",
            vec![],
            (9, 3),
        ),
    ];
    for (i, (api, m, stream, text, calls, usage)) in cases.into_iter().enumerate() {
        let reply = complete(api, vec![m], stream).unwrap_or_else(|e| panic!("case {i}: {e}"));
        assert_eq!(reply.text, text, "case {i}");
        let got: Vec<(String, Value)> = reply
            .tool_calls
            .iter()
            .map(|c| (c.name.clone(), c.arguments.clone()))
            .collect();
        let want: Vec<(String, Value)> =
            calls.into_iter().map(|(n, a)| (n.to_owned(), a)).collect();
        assert_eq!(got, want, "case {i}");
        assert!(
            reply.tool_calls.iter().all(|c| !c.id.is_empty()),
            "case {i}: ids are generated"
        );
        assert_eq!(
            (reply.usage.input_tokens, reply.usage.output_tokens),
            usage,
            "case {i}"
        );
    }
}

#[test]
fn unreadable_answers_are_clear_errors() {
    let cases: Vec<(Api, Move, bool, &str)> = vec![
        (Api::OpenAi, Move::Raw("<html>502 Bad Gateway</html>".into()), false, "cannot read the answer"),
        (Api::OpenAi, Move::Raw(r#"{"choices":[]}"#.into()), false, "no `choices`"),
        (Api::OpenAi, Move::RawStream(vec!["{broken".into()]), true, "not JSON"),
        (Api::OpenAi, Move::Raw(r#"{"error":{"message":"model overloaded"}}"#.into()), false, "model overloaded"),
        (Api::Anthropic, Move::RawStream(vec![r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#.into()]), true, "Overloaded"),
        (Api::OpenAi, Move::Status { status: 400, body: r#"{"error":{"message":"tools are not supported by this model"}}"#.into(), retry_after: None }, false, "answered 400: tools are not supported"),
        (Api::Anthropic, Move::Status { status: 401, body: r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#.into(), retry_after: None }, false, "401: invalid x-api-key"),
    ];
    for (api, m, stream, want) in cases {
        let err = complete(api, vec![m], stream).unwrap_err().to_string();
        assert!(err.contains(want), "{api:?}: {err}");
        assert!(
            err.contains("127.0.0.1"),
            "the error names the endpoint: {err}"
        );
    }
}

#[test]
fn retries_429_and_5xx_with_backoff_then_succeeds() {
    for api in [Api::OpenAi, Api::Anthropic] {
        let server = FakeServer::start(api).unwrap();
        server.push([
            Move::Status {
                status: 429,
                body: "{}".into(),
                retry_after: Some("0".into()),
            },
            Move::status(503),
            Move::text("ok"),
        ]);
        let p = provider::from_config("fake", &provider_config(&server, api)).unwrap();
        let reply = p.complete(&request(true), &mut |_| {}).unwrap();
        assert_eq!(reply.text, "ok");
        assert_eq!(server.requests().len(), 3, "{api:?}");
    }
    // Past the retry budget, the last error is returned; a 400 is never retried.
    let server = FakeServer::start(Api::OpenAi).unwrap();
    server.push([
        Move::status(500),
        Move::status(502),
        Move::status(500),
        Move::text("late"),
    ]);
    let mut config = provider_config(&server, Api::OpenAi);
    config.max_retries = 2;
    let p = provider::from_config("fake", &config).unwrap();
    let err = p.complete(&request(false), &mut |_| {}).unwrap_err();
    assert!(
        matches!(err, ProviderError::Status { status: 500, .. }),
        "{err}"
    );
    assert_eq!(server.requests().len(), 3);
    let server = FakeServer::start(Api::OpenAi).unwrap();
    server.push([Move::status(400), Move::text("never")]);
    let p = provider::from_config("fake", &provider_config(&server, Api::OpenAi)).unwrap();
    assert!(p.complete(&request(false), &mut |_| {}).is_err());
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn a_server_that_does_not_answer_times_out() {
    for api in [Api::OpenAi, Api::Anthropic] {
        let server = FakeServer::start(api).unwrap();
        server.push([Move::Stall(Duration::from_secs(3))]);
        let mut config = provider_config(&server, api);
        config.timeout = 0.3;
        config.max_retries = 0;
        let p = provider::from_config("fake", &config).unwrap();
        let started = Instant::now();
        let err = p.complete(&request(false), &mut |_| {}).unwrap_err();
        assert!(
            matches!(err, ProviderError::Timeout { .. }),
            "{api:?}: {err}"
        );
        assert!(
            err.to_string().contains("did not answer within 0.3 s"),
            "{err}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
    }
}

#[test]
fn unreachable_endpoints_and_missing_keys_say_so() {
    let mut config =
        quiver_agent::ProviderConfig::new(ProviderKind::Openai, "http://127.0.0.1:9/v1", "m");
    config.max_retries = 0;
    config.timeout = 2.0;
    let p = provider::from_config("local", &config).unwrap();
    let err = p
        .complete(&request(false), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("cannot reach http://127.0.0.1:9/v1/chat/completions"),
        "{err}"
    );
    config.api_key_env = Some("QUIVER_TEST_SURELY_UNSET_KEY".into());
    let err = provider::from_config("local", &config)
        .err()
        .unwrap()
        .to_string();
    assert_eq!(
        err,
        "the API key variable `QUIVER_TEST_SURELY_UNSET_KEY` is not set"
    );
}
