//! Issue 23 item 3: Quiver's MCP client consumes a server that offers skills through the MCP
//! Skills extension, interoperating with a second implementation, `agentskills-mcp-server`
//! (pinned in scripts/requirements-skills-server.txt, run by
//! `tests/mcp/agentskills_server.py` as a local stdio server in Quiver's sandbox): its skills
//! become the server package's skills, readable with `read_skill`, and Quiver serves them
//! again as `skill://` resources, which a plain Python MCP client reads back byte for byte
//! (`tests/mcp/skills_client.py`), text and binary files alike.
//!
//! A second Quiver, served over Streamable HTTP, is consumed the same way through
//! `skills/list`, each file checked against its digest and size.
//!
//! The first test needs the sandbox; where the machine cannot sandbox it prints why and skips.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

mod support;

use support::{Server, json, python_with, repo_root, test_venv};

fn mcp_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp")
}

fn sandbox_ok() -> bool {
    match quiver_sandbox::support() {
        Ok(()) => true,
        Err(why) => {
            eprintln!("SKIPPED: the sandbox cannot run here: {why}");
            false
        }
    }
}

fn write(root: &Path, rel: &str, bytes: &[u8]) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

fn quiver(root: &Path, config: &Path, home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_quiver"))
        .arg("--root")
        .arg(root)
        .args(args)
        .env("QUIVER_CONFIG", config)
        .env("QUIVER_HOME", home)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn issue_23_skills_of_another_skills_extension_server_become_a_package() {
    if !sandbox_ok() {
        return;
    }
    let python = python_with("mcp, agentskills_mcp_server, agentskills_fs, yaml");
    let tmp = tempfile::tempdir().unwrap();
    let tmp_path = std::fs::canonicalize(tmp.path()).unwrap();
    let skills = tmp_path.join("skills");
    let png: &[u8] = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe";
    let originals: [(&str, &[u8]); 5] = [
        (
            "greet/SKILL.md",
            "---\nname: greet\ndescription: Greets people in their own language.\n---\n# Greet\n\nUse [the forms](forms.md) and `reference/foo.md`. 用对方的语言问好。\n".as_bytes(),
        ),
        ("greet/forms.md", b"Hello / \xe4\xbd\xa0\xe5\xa5\xbd\n"),
        ("greet/reference/foo.md", b"foo reference\n"),
        ("greet/assets/logo.png", png),
        ("greet/scripts/hello.py", b"print('hi')\n"),
    ];
    for (rel, bytes) in originals {
        write(&skills, rel, bytes);
    }
    let server_json = tmp_path.join("server.json");
    std::fs::write(
        &server_json,
        format!(
            r#"{{"name": "Skill hub", "skills": [{{"id": "greet", "provider": "fs", "options": {{"root": "{}"}}}}]}}"#,
            skills.display()
        ),
    )
    .unwrap();
    let base = Command::new(&python)
        .args(["-c", "import sys; print(sys.base_prefix)"])
        .output()
        .unwrap();
    let base = String::from_utf8_lossy(&base.stdout).trim().to_owned();
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap().display().to_string();
    let reads = [
        canonical(&test_venv()),
        canonical(Path::new(&base)),
        canonical(&mcp_dir()),
        tmp_path.display().to_string(),
    ]
    .map(|p| format!("\"{p}\""))
    .join(", ");
    let config = tmp_path.join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "mcp_servers:\n  hub:\n    command: [\"{}\", \"{}\", --config, \"{}\"]\n    permissions:\n      filesystem: {{read: [{reads}]}}\n",
            python.display(),
            mcp_dir().join("agentskills_server.py").display(),
            server_json.display(),
        ),
    )
    .unwrap();
    let home = tmp_path.join("home");
    let root = tmp_path.join("packages");
    std::fs::create_dir_all(&root).unwrap();

    // Its skill is a skill of the server's package.
    let out = quiver(&root, &config, &home, &["list", "--json"]);
    let list = json(&out);
    let hub = list
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == "hub")
        .unwrap_or_else(|| panic!("no package `hub`: {list}"));
    assert_eq!(hub["skills"][0]["id"], "hub/greet", "{hub}");
    assert_eq!(
        hub["skills"][0]["description"],
        "Greets people in their own language."
    );
    // The mirror holds exactly the server's bytes.
    let mirror = home.join("mcp/hub/skills");
    for (rel, bytes) in originals {
        assert_eq!(std::fs::read(mirror.join(rel)).unwrap(), bytes, "{rel}");
    }

    // read_skill reads it and every file of its folder.
    let read = |id: &str| -> Value {
        let out = quiver(
            &root,
            &config,
            &home,
            &[
                "call",
                "read_skill",
                "--args",
                &format!(r#"{{"id": "{id}"}}"#),
            ],
        );
        json(&out)
    };
    let opened = read("hub/greet");
    let text = opened.to_string();
    assert!(text.contains("用对方的语言问好"), "{text}");
    for file in [
        "hub/greet/assets/logo.png",
        "hub/greet/forms.md",
        "hub/greet/reference/foo.md",
        "hub/greet/scripts/hello.py",
    ] {
        assert!(text.contains(file), "{file}: {text}");
    }
    let foo = read("hub/greet/reference/foo.md").to_string();
    assert!(foo.contains("foo reference"), "{foo}");

    // Quiver serves it again; a plain Python MCP client reads every byte back.
    let mut pairs: Vec<String> = originals
        .iter()
        .map(|(rel, _)| format!("skill://hub/{rel}={}", skills.join(rel).display()))
        .collect();
    pairs.sort();
    for mode in ["legacy", "2026-07-28"] {
        let out = Command::new(python_with("mcp"))
            .arg(mcp_dir().join("skills_client.py"))
            .arg(env!("CARGO_BIN_EXE_quiver"))
            .arg(&root)
            .arg(&config)
            .arg(mode)
            .args(&pairs)
            .env("QUIVER_HOME", &home)
            .current_dir(mcp_dir())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{mode}:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(stdout.matches("ok bytes of").count(), 5, "{mode}: {stdout}");
    }
}

/// Quiver consumes another Quiver's skills: the served catalog's skills (`weather`, and
/// `daily-report/weekly` with its Unicode-free name) become the remote server's package's
/// skills, mirrored with exactly the served bytes.
#[test]
fn issue_23_skills_of_another_quiver_come_through_skills_list() {
    let tmp = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let examples = repo_root().join("examples/packages");
    let served = Command::new(env!("CARGO_BIN_EXE_quiver"))
        .arg("--root")
        .arg(&examples)
        .args([
            "serve",
            "--http",
            &format!("127.0.0.1:{port}"),
            "--allow-anonymous",
        ])
        .arg("--db")
        .arg(tmp.path().join("served.db"))
        .env("QUIVER_HOME", tmp.path().join("served-home"))
        .env("QUIVER_CONFIG", "/nonexistent")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _served = Server(served);
    let up = (0..200).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(50));
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    assert!(up, "quiver serve --http did not listen on {port}");
    let config = tmp.path().join("config.yaml");
    std::fs::write(
        &config,
        format!("mcp_servers:\n  peer:\n    url: http://127.0.0.1:{port}/mcp\n"),
    )
    .unwrap();
    let home = tmp.path().join("home");
    let root = tmp.path().join("packages");
    std::fs::create_dir_all(&root).unwrap();
    let out = quiver(&root, &config, &home, &["list", "--json"]);
    let list = json(&out);
    let peer = list
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == "peer")
        .unwrap_or_else(|| panic!("no package `peer`: {list}"));
    let mut ids: Vec<&str> = peer["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    ids.sort();
    assert_eq!(ids, ["peer/weather", "peer/weekly"], "{peer}");
    let mirror = home.join("mcp/peer/skills");
    for (mirrored, original) in [
        ("weather/SKILL.md", "weather/SKILL.md"),
        (
            "weather/references/cities.md",
            "weather/references/cities.md",
        ),
        ("weekly/SKILL.md", "daily-report/skills/weekly/SKILL.md"),
    ] {
        assert_eq!(
            std::fs::read(mirror.join(mirrored)).unwrap(),
            std::fs::read(examples.join(original)).unwrap(),
            "{mirrored}"
        );
    }
    // The served skill's tools are the served server's tools, never files of its skills.
    assert!(!mirror.join("weekly/tools").exists());
}
