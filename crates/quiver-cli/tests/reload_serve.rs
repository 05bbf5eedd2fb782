//! Issue 24 item 7, end to end: a real `quiver serve --stdio` spoken to over newline-delimited
//! JSON-RPC (2025-11-25): an edited skill is served after a save, and the client receives
//! `notifications/resources/list_changed`; `quiver reload` asks the same process to reload
//! and reports its answer; the tool list stays the same throughout.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

mod support;

use support::Server;

fn skill(description: &str, body: &str) -> String {
    format!("---\nname: notes\ndescription: {description}\n---\n{body}\n")
}

/// A client over the server's stdin and a thread reading its stdout into `messages`.
struct Client {
    stdin: ChildStdin,
    messages: Receiver<Value>,
    next_id: u64,
    /// Notifications received while waiting for answers.
    notifications: Vec<Value>,
}

impl Client {
    fn send(&mut self, message: Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let message = self
                .messages
                .recv_timeout(Duration::from_secs(30))
                .expect("an answer");
            if message["id"] == id {
                assert!(message["error"].is_null(), "{method}: {message}");
                return message["result"].clone();
            }
            self.notifications.push(message);
        }
    }

    /// Waits up to 20 s for a notification named `method`.
    fn notified(&mut self, method: &str) -> bool {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(at) = self
                .notifications
                .iter()
                .position(|n| n["method"] == method)
            {
                self.notifications.remove(at);
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.messages.recv_timeout(left) {
                Ok(message) => self.notifications.push(message),
                Err(_) => return false,
            }
        }
    }
}

fn text_of(read: &Value) -> String {
    read["contents"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn issue_24_an_edited_skill_is_served_after_a_save_and_the_client_is_told() {
    let tmp = tempfile::tempdir().unwrap();
    let tmp_path = std::fs::canonicalize(tmp.path()).unwrap();
    let packages = tmp_path.join("packages");
    let home = tmp_path.join("home");
    std::fs::create_dir_all(packages.join("notes")).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let skill_file = packages.join("notes/SKILL.md");
    std::fs::write(&skill_file, skill("Takes notes.", "First version.")).unwrap();
    let config = tmp_path.join("config.yaml");
    std::fs::write(&config, "roots: []\n").unwrap();

    let mut child = Command::new(env!("CARGO_BIN_EXE_quiver"))
        .args(["--root"])
        .arg(&packages)
        .args(["serve", "--stdio"])
        .env("QUIVER_CONFIG", &config)
        .env("QUIVER_HOME", &home)
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let _server = Server(child);
    let (tx, messages) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Ok(message) = serde_json::from_str::<Value>(&line)
                && tx.send(message).is_err()
            {
                break;
            }
        }
    });
    let mut client = Client {
        stdin,
        messages,
        next_id: 0,
        notifications: Vec::new(),
    };
    let init = client.request(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "reload-test", "version": "1"}}),
    );
    assert_eq!(
        init["capabilities"]["resources"]["listChanged"], true,
        "{init}"
    );
    client.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let tools_before = client.request("tools/list", json!({}));
    let listed = client.request("resources/list", json!({}));
    let uri = listed["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|r| {
            let uri = r["uri"].as_str()?;
            uri.ends_with("notes/SKILL.md").then(|| uri.to_owned())
        })
        .unwrap_or_else(|| panic!("no notes/SKILL.md in {listed}"));
    let read = client.request("resources/read", json!({"uri": uri}));
    assert!(text_of(&read).contains("First version."), "{read}");

    // A save through a temporary file renamed over the skill, as editors do.
    let temp = packages.join("notes/SKILL.md.tmp");
    std::fs::write(
        &temp,
        skill("Takes notes, edited.", "Second version, longer."),
    )
    .unwrap();
    std::fs::rename(&temp, &skill_file).unwrap();
    assert!(
        client.notified("notifications/resources/list_changed"),
        "no list-changed notification after the save"
    );
    let read = client.request("resources/read", json!({"uri": uri}));
    assert!(text_of(&read).contains("Second version, longer."), "{read}");

    // `quiver reload` reaches the same process through the state folder.
    let reload = Command::new(env!("CARGO_BIN_EXE_quiver"))
        .arg("reload")
        .env("QUIVER_CONFIG", &config)
        .env("QUIVER_HOME", &home)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&reload.stdout);
    assert!(reload.status.success(), "{reload:?}");
    assert!(
        out.starts_with("reloaded: 1 package(s), 0 error(s)"),
        "{out}"
    );

    // The tool list never changed.
    assert_eq!(client.request("tools/list", json!({})), tools_before);
}

/// With nothing serving, `quiver reload` says so and fails.
#[test]
fn issue_24_reload_without_a_server_fails_with_a_hint() {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_quiver"))
        .args(["reload", "--wait", "1"])
        .env("QUIVER_HOME", tmp.path())
        .env("QUIVER_CONFIG", Path::new("/nonexistent/config.yaml"))
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no running `quiver serve`"), "{err}");
    assert!(err.contains("hint:"), "{err}");
}
