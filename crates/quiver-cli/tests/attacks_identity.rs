//! Issue 13 item 11: claiming another package's id hands over neither its data nor its
//! settings. Through real `quiver call`s in the sandbox: the folder that first ran under an id
//! owns `data/<id>`; a package that takes the id over (refused unless the operator's
//! `allow_shadow` names it) starts with a data folder of its own, and the shadowed owner runs
//! nothing under the id. Skips where the machine cannot sandbox.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

const TOKEN: &str = "tok-5d1e0c7a";

/// Writes package `vault` under `root`: its tool `peek` reports the mark its data folder held,
/// then leaves its own mark (`who`), and the token setting it was given (shell builtins only:
/// the sandbox lets a tool execute only its own command).
fn vault(root: &Path, who: &str) {
    let tool = root.join("vault/tools/peek");
    std::fs::create_dir_all(&tool).unwrap();
    std::fs::write(
        tool.join("peek.sh"),
        format!(
            "seen=none\nread -r seen < \"$QUIVER_DATA_DIR/mark\" 2>/dev/null\necho {who} > \"$QUIVER_DATA_DIR/mark\"\nprintf '{{\"seen\": \"%s\", \"token\": \"%s\"}}' \"$seen\" \"$QUIVER_SETTING_TOKEN\"\n"
        ),
    )
    .unwrap();
    std::fs::write(
        tool.join("tool.yaml"),
        "name: peek\ndescription: Shows what the data folder held.\ncategory: action\napproval: never\nexpose: true\nrun: {command: [sh, peek.sh]}\n",
    )
    .unwrap();
    std::fs::write(
        root.join("vault/quiver.yaml"),
        format!("id: vault\nname: vault\nversion: 1.0.0\ndescription: The {who} copy of vault\nconfig:\n  type: object\n  properties:\n    token: {{type: string}}\n"),
    )
    .unwrap();
}

struct World {
    _dir: tempfile::TempDir,
    top: PathBuf,
}

impl World {
    /// Writes the config: `roots` as (folder, scope), the vault's token, and `allow_shadow`.
    fn config(&self, roots: &[(&str, &str)], allow_shadow: bool) {
        let mut text = String::from("roots:\n");
        for (folder, scope) in roots {
            text.push_str(&format!(
                "  - path: {}\n    scope: {scope}\n",
                self.top.join(folder).display()
            ));
        }
        if allow_shadow {
            text.push_str("allow_shadow: [vault]\n");
        }
        text.push_str(&format!(
            "runtime:\n  allow_unsandboxed: false\n  settings:\n    vault: {{token: {TOKEN}}}\n"
        ));
        std::fs::write(self.top.join("config.yaml"), text).unwrap();
    }

    /// `quiver call tool`'s answer.
    fn call(&self, tool: &str) -> Value {
        let out = Command::new(env!("CARGO_BIN_EXE_quiver"))
            .args(["call", tool, "--args", "{}", "--yes"])
            .env("QUIVER_HOME", self.top.join("home"))
            .env("QUIVER_CONFIG", self.top.join("config.yaml"))
            .env_remove("QUIVER_PATH")
            .current_dir(&self.top)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let value: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{tool}: {e}: {}", String::from_utf8_lossy(&out.stderr)));
        value
    }

    /// `quiver call tool`, which must run: its content.
    fn peek(&self, tool: &str) -> Value {
        let value = self.call(tool);
        assert_eq!(value["outcome"]["status"], "ok", "{tool}: {value}");
        value["outcome"]["content"].clone()
    }
}

#[test]
fn a_package_claiming_another_ones_id_gets_neither_its_data_nor_its_settings() {
    if let Err(why) = quiver_sandbox::support() {
        eprintln!("SKIPPED: the sandbox cannot run here: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let world = World {
        top: std::fs::canonicalize(dir.path()).unwrap(),
        _dir: dir,
    };
    vault(&world.top.join("installed"), "owner");
    vault(&world.top.join("project"), "claimant");
    // The installed vault runs first: it owns the id, its data and its settings.
    world.config(&[("installed", "installed")], false);
    let first = world.peek("vault.peek");
    assert_eq!(
        (first["seen"].as_str(), first["token"].as_str()),
        (Some("none"), Some(TOKEN))
    );
    // A project package claiming the id is refused: the owner still answers.
    world.config(&[("project", "project"), ("installed", "installed")], false);
    let refused = world.peek("vault.peek");
    assert_eq!(refused["seen"], "owner", "{refused}");
    // Allowed by the operator, the claimant takes the id over, with a data folder of its
    // own: the owner's mark is not there.
    world.config(&[("project", "project"), ("installed", "installed")], true);
    let claimant = world.peek("vault.peek");
    assert_eq!(
        claimant["seen"], "none",
        "the owner's data was handed over: {claimant}"
    );
    assert_eq!(world.peek("vault.peek")["seen"], "claimant");
    // The shadowed owner runs nothing under the id any more: no caller reaches it.
    let shadowed = world.call("installed:vault.peek");
    assert_eq!(shadowed["outcome"]["status"], "unknown", "{shadowed}");
}
