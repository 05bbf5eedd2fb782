//! Issue 22 item 4: prompt sections over MCP (docs/mcp.md "Prompt sections"): the server's
//! `instructions` carry what a chat turn's system prompt would, and a front that cannot
//! deliver a required section fails as chat does.

use std::path::Path;

use quiver_mcp::McpConfig;
use quiver_runtime::RuntimeConfig;
use rmcp::model::ProtocolVersion;
use rmcp::{ClientLifecycleMode, ClientServiceExt, ServiceExt};
use tokio_util::sync::CancellationToken;

use super::harness::{Scripted, front_with_runtime};

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn rules(root: &Path) {
    write(
        root,
        "house/quiver.yaml",
        "id: house\ndescription: House rules\n",
    );
    write(
        root,
        "house/SKILL.md",
        "---\nname: house\ndescription: House rules\n---\nFollow them.\n",
    );
    write(
        root,
        "house/prompts/rules.md",
        "---\nretention: required\n---\nHOUSE RULES: never share the door code.\n",
    );
    write(
        root,
        "house/prompts/night.md",
        "---\nprofiles: [schedule]\n---\nNIGHT ONLY.\n",
    );
}

/// Connects over an in-memory pipe in `version`'s era; the server's instructions, or why the
/// handshake failed.
async fn handshake(budget: usize, version: ProtocolVersion) -> Result<String, String> {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("packages");
    rules(&root);
    let mut config = RuntimeConfig::default();
    config.budget.sections = budget;
    let front = front_with_runtime(&[root], dir.path(), McpConfig::default(), config);
    let (server_side, client_side) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        let _ = quiver_mcp::serve_stdio(
            front,
            tokio::io::split(server_side),
            CancellationToken::new(),
        )
        .await;
    });
    let client = Scripted::era(version.clone());
    let running = if version == ProtocolVersion::V_2026_07_28 {
        let lifecycle = ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        };
        client.serve_with_lifecycle(client_side, lifecycle).await
    } else {
        client.serve(client_side).await
    }
    .map_err(|e| e.to_string())?;
    Ok(running
        .peer_info()
        .and_then(|info| info.instructions.clone())
        .unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_required_section_reaches_the_client_or_the_handshake_fails() {
    for version in [ProtocolVersion::V_2025_11_25, ProtocolVersion::V_2026_07_28] {
        let instructions = handshake(8_000, version.clone()).await.unwrap();
        assert!(
            instructions.starts_with("Quiver serves a catalog")
                && instructions.contains("HOUSE RULES: never share the door code."),
            "{version}: {instructions}"
        );
        assert!(!instructions.contains("NIGHT ONLY"), "{instructions}");
        let error = handshake(10, version.clone()).await.unwrap_err();
        assert!(
            error.contains("the required prompt sections house.rules need"),
            "{version}: {error}"
        );
    }
}
