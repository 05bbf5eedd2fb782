//! Item 5: the environment as the ecosystem sets it.

use quiver_agent::fake::{Api, FakeServer, Move};

use crate::{Quiver, both, sandbox_ok, support::json};

/// A package whose tool declares `OPENAI_BASE_URL` and reports what it received, as a tool
/// built on the OpenAI SDK would read it.
fn env_package(q: &Quiver) {
    q.write(
        "packages/envy/quiver.yaml",
        "id: envy\nname: envy\nversion: 1.0.0\ndescription: Reports a variable\npermissions: {env: [OPENAI_BASE_URL]}\n",
    );
    q.write(
        "packages/envy/tools/show/tool.yaml",
        "description: Reports the variable.\ncategory: perception\napproval: never\nexpose: true\npermission: {env: [OPENAI_BASE_URL]}\nrun: {command: [sh, main.sh]}\n",
    );
    q.write(
        "packages/envy/tools/show/main.sh",
        "cat >/dev/null\nif [ \"${OPENAI_BASE_URL+set}\" = set ]; then printf '{\"set\": true, \"value\": \"%s\"}' \"$OPENAI_BASE_URL\"; else printf '{\"set\": false}'; fi\n",
    );
}

/// Issue 23: an empty variable a client passes (`"env": {"OPENAI_BASE_URL": ""}` in an MCP
/// client's configuration) reached the tool as set-but-empty, which the SDKs take for a base
/// URL: every tool of the package broke. An empty variable counts as unset.
#[test]
fn an_empty_variable_reaches_a_tool_as_unset() {
    if !sandbox_ok() {
        return;
    }
    let q = Quiver::new();
    env_package(&q);
    let root = q.path("packages");
    let root = root.to_str().unwrap();
    let cases = [
        (Some(""), serde_json::json!({"set": false})),
        (None, serde_json::json!({"set": false})),
        (
            Some("http://127.0.0.1:1/v1"),
            serde_json::json!({"set": true, "value": "http://127.0.0.1:1/v1"}),
        ),
    ];
    for (value, want) in cases {
        let mut command = q.command(&["--root", root, "call", "envy.show", "--yes"]);
        if let Some(value) = value {
            command.env("OPENAI_BASE_URL", value);
        }
        let out = command.output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{value:?}: {}", both(&out));
        let v = json(&out);
        assert_eq!(v["outcome"]["status"], "ok", "{value:?}: {v}");
        assert_eq!(v["outcome"]["content"], want, "{value:?}");
    }
}

/// The config file is found as the agent configuration is: `$XDG_CONFIG_HOME/quiver/`,
/// and an empty or relative `XDG_CONFIG_HOME` counts as unset (no config from the current
/// folder).
#[test]
fn the_config_file_follows_xdg_config_home() {
    let q = Quiver::new();
    env_package(&q);
    let roots = format!("roots: [{{path: {}}}]\n", q.path("packages").display());
    q.write("xdg/quiver/config.yaml", &roots);
    // A config in the working folder that must never be read.
    q.write("cwd/quiver/config.yaml", &roots);
    let xdg = q.path("xdg");
    let cases = [
        (xdg.to_str().unwrap(), true),
        ("", false),
        (".", false),
        ("quiver", false),
    ];
    for (value, found) in cases {
        let out = q.run(&["list", "--json"], &[("XDG_CONFIG_HOME", value)]);
        assert_eq!(out.status.code(), Some(0), "{value:?}: {}", both(&out));
        let ids: Vec<String> = json(&out)
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["id"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(
            ids.contains(&"envy".to_owned()),
            found,
            "{value:?}: {ids:?}"
        );
    }
}

/// `OPENAI_BASE_URL` and `OPENAI_API_KEY` describe the provider as the OpenAI SDK reads them:
/// no configuration file needed, the key sent as a bearer token.
#[test]
fn the_openai_sdk_variables_describe_a_provider() {
    let server = FakeServer::start(Api::OpenAi).unwrap();
    server.push([Move::text("你好")]);
    let q = Quiver::new();
    let out = q.run(
        &[
            "--root",
            q.path("cwd").to_str().unwrap(),
            "chat",
            "-m",
            "hi",
        ],
        &[
            ("OPENAI_BASE_URL", server.url()),
            ("OPENAI_API_KEY", "sk-test"),
            ("QUIVER_MODEL", "fake-model"),
            ("ANTHROPIC_API_KEY", ""),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", both(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("你好"));
    let request = &server.requests()[0];
    assert_eq!(request.headers["authorization"], "Bearer sk-test");
    assert_eq!(request.body["model"], "fake-model");
}

/// `ANTHROPIC_BASE_URL` and `ANTHROPIC_API_KEY` as the Anthropic SDK reads them; an empty
/// `OPENAI_*` beside them counts as unset, so it is the Anthropic provider.
#[test]
fn the_anthropic_sdk_variables_describe_a_provider() {
    let server = FakeServer::start(Api::Anthropic).unwrap();
    server.push([Move::text("好的")]);
    let q = Quiver::new();
    let out = q.run(
        &[
            "--root",
            q.path("cwd").to_str().unwrap(),
            "chat",
            "-m",
            "hi",
        ],
        &[
            ("ANTHROPIC_BASE_URL", server.url()),
            ("ANTHROPIC_API_KEY", "ak-test"),
            ("OPENAI_BASE_URL", ""),
            ("OPENAI_API_KEY", ""),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", both(&out));
    let request = &server.requests()[0];
    assert_eq!(request.headers["x-api-key"], "ak-test");
    assert_eq!(request.body["model"], "claude-sonnet-4-5");
}

/// Quiver's own variables win: `QUIVER_BASE_URL` names the server, and the SDK's key is not
/// sent to a server it was not meant for.
#[test]
fn quivers_own_variables_win_over_the_sdks() {
    let server = FakeServer::start(Api::OpenAi).unwrap();
    server.push([Move::text("ok")]);
    let q = Quiver::new();
    let out = q.run(
        &[
            "--root",
            q.path("cwd").to_str().unwrap(),
            "chat",
            "-m",
            "hi",
        ],
        &[
            ("OPENAI_BASE_URL", "http://127.0.0.1:9/v1"),
            ("OPENAI_API_KEY", "sk-secret"),
            ("QUIVER_BASE_URL", server.url()),
            ("QUIVER_MODEL", "local"),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", both(&out));
    let request = &server.requests()[0];
    assert!(
        !request.headers.contains_key("authorization"),
        "{:?}",
        request.headers
    );
    assert_eq!(request.body["model"], "local");
}
