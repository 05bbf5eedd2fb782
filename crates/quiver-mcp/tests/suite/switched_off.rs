//! A package the operator switched off is absent over MCP: from `skills/list`, `skills/get`,
//! `resources/list`, `resources/read` and the `always_loaded` tools of `tools/list`, and back
//! when switched on again.

use quiver_runtime::presence::OperatorAlwaysLoaded;
use rmcp::model::{GetSkillRequestParams, ReadResourceRequestParams};

use quiver_mcp::McpConfig;
use quiver_runtime::RuntimeConfig;

use super::harness::{Scripted, connect, examples, front_with_runtime};

/// What the client sees of the `weather` package.
async fn seen(client: &super::harness::Client) -> [bool; 5] {
    let skills = client.list_skills(None).await.unwrap();
    let listed = skills
        .skills
        .iter()
        .any(|s| s.uri == "skill://weather/SKILL.md");
    let got = client
        .get_skill(GetSkillRequestParams::new("skill://weather/SKILL.md"))
        .await
        .is_ok();
    let resources = client.list_resources(None).await.unwrap();
    let in_resources = resources
        .resources
        .iter()
        .any(|r| r.uri.starts_with("skill://weather/"));
    let read = client
        .read_resource(ReadResourceRequestParams::new(
            "skill://weather/references/cities.md",
        ))
        .await
        .is_ok();
    let tools = client.list_tools(None).await.unwrap();
    let resident = tools.tools.iter().any(|t| t.name == "weather__forecast");
    [listed, got, in_resources, read, resident]
}

#[tokio::test(flavor = "multi_thread")]
async fn a_switched_off_package_is_absent() {
    let dir = tempfile::tempdir().unwrap();
    let runtime_config = RuntimeConfig {
        always_loaded: OperatorAlwaysLoaded::Replace(vec!["weather.forecast".into()]),
        ..RuntimeConfig::default()
    };
    let front = front_with_runtime(
        &[examples()],
        dir.path(),
        McpConfig::default(),
        runtime_config,
    );
    let runtime = front.runtime().clone();
    let client = connect(front, Scripted::default()).await;
    let cases = [
        ("on", true, [true; 5]),
        ("switched off", false, [false; 5]),
        ("on again", true, [true; 5]),
    ];
    for (what, enabled, want) in cases {
        runtime.set_enabled("weather", enabled, "test").unwrap();
        assert_eq!(seen(&client).await, want, "{what}");
    }
    // A switch made by another process on the same store counts too.
    let other = super::harness::state(dir.path());
    quiver_runtime::operator::set_enabled(other.as_ref(), "weather", false, "other").unwrap();
    assert_eq!(seen(&client).await, [false; 5], "off from another process");
    client.cancel().await.unwrap();
}
