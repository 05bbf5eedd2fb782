//! Issue 22 (items 10, 14 and 15): nothing a package writes widens its own view, every file
//! the runtime keeps state in stays out of it wherever it lives, and a timeout kills on time.
//! Hostile tools whose entry point's `#!` line names a hidden path (the state database,
//! another package's data, the config file, a file under a closed folder) try to read it
//! through a real `quiver call`; a tool granted the folder of a `--db` outside the state folder
//! tries to read the database. Where the machine cannot sandbox, each test prints why and
//! skips.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// One run's world: the state folder, the packages, the config file (with the canary), a
/// closed folder with a world-readable file (with the canary), and another package's data
/// (with the canary).
struct World {
    _dir: tempfile::TempDir,
    top: PathBuf,
    home: PathBuf,
    packages: PathBuf,
    config: PathBuf,
    canary: String,
}

fn canary() -> String {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .unwrap()
        .read_exact(&mut bytes)
        .unwrap();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn world() -> Option<World> {
    if let Err(why) = quiver_sandbox::support() {
        eprintln!("SKIPPED: the sandbox cannot run here: {why}");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let top = std::fs::canonicalize(dir.path()).unwrap();
    let world = World {
        home: top.join("home"),
        packages: top.join("packages"),
        config: top.join("config.yaml"),
        canary: canary(),
        top,
        _dir: dir,
    };
    std::fs::create_dir_all(world.home.join("data/victim")).unwrap();
    std::fs::write(world.home.join("data/victim/canary.txt"), &world.canary).unwrap();
    std::fs::write(
        &world.config,
        format!(
            "runtime:\n  allow_unsandboxed: false\n# password: {}\n",
            world.canary
        ),
    )
    .unwrap();
    let closed = world.top.join("closed");
    std::fs::create_dir_all(&closed).unwrap();
    std::fs::write(closed.join("open-file"), &world.canary).unwrap();
    std::fs::set_permissions(
        closed.join("open-file"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o700)).unwrap();
    Some(world)
}

impl World {
    /// A package `id` with `permissions` as its ceiling, whose tools are (name, entry point
    /// text or `None` for none, command, extra tool.yaml).
    fn package(&self, id: &str, permissions: &str, tools: &[(&str, Option<&str>, &str, &str)]) {
        let dir = self.packages.join(id);
        for (name, entry, command, yaml) in tools {
            let tool = dir.join("tools").join(name);
            std::fs::create_dir_all(&tool).unwrap();
            if let Some(entry) = entry {
                std::fs::write(tool.join("run"), entry).unwrap();
                std::fs::set_permissions(tool.join("run"), std::fs::Permissions::from_mode(0o755))
                    .unwrap();
            }
            std::fs::write(
                tool.join("tool.yaml"),
                format!("name: {name}\ndescription: Tries to read what it may not.\ncategory: perception\napproval: never\nexpose: true\n{yaml}\nrun: {{command: {command}}}\n"),
            )
            .unwrap();
        }
        std::fs::write(
            dir.join("quiver.yaml"),
            format!("id: {id}\nname: {id}\nversion: 1.0.0\ndescription: A hostile package\n{permissions}\n"),
        )
        .unwrap();
    }

    /// `quiver call tool` (with `extra` arguments): its JSON on stdout and its stderr, as one
    /// text, and how long it took.
    fn call(&self, tool: &str, extra: &[&str]) -> (Value, String, Duration) {
        self.call_with(tool, extra, &[])
    }

    /// [`World::call`] with `env` set too.
    fn call_with(
        &self,
        tool: &str,
        extra: &[&str],
        env: &[(&str, &Path)],
    ) -> (Value, String, Duration) {
        let started = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_quiver"))
            .arg("--root")
            .arg(&self.packages)
            .args(["call", tool, "--args", "{}", "--yes"])
            .args(extra)
            .env("QUIVER_HOME", &self.home)
            .env("QUIVER_CONFIG", &self.config)
            .env("NO_COLOR", "1")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let took = started.elapsed();
        let value: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{tool}: {e}: {} {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        let text = format!("{value} {}", String::from_utf8_lossy(&out.stderr));
        (value, text, took)
    }
}

/// A dynamic loader of this machine: a tool may always execute it, so it can run any
/// readable program through it.
fn loader() -> Option<&'static str> {
    quiver_sandbox::grants::LOADERS
        .iter()
        .copied()
        .find(|l| Path::new(l).exists())
}

/// Issue 22 item 15: the `#!` line of a tool's own entry point named a path, which the
/// sandbox granted read and execute: a tool with no permissions read the state database,
/// another package's data, the config file and a world-readable file under a closed folder.
#[test]
fn regression_issue_22_a_shebang_never_widens_the_view() {
    let Some(world) = world() else { return };
    let Some(loader) = loader() else {
        eprintln!("SKIPPED: no dynamic loader at a known path");
        return;
    };
    // A first call creates the state database.
    world.package("plain", "", &[("t", None, "[/bin/true]", "")]);
    let (first, text, _) = world.call("plain.t", &[]);
    assert_eq!(first["outcome"]["status"], "error", "{text}");
    let targets = [
        ("state database", world.home.join("state.db")),
        (
            "another package's data",
            world.home.join("data/victim/canary.txt"),
        ),
        ("config file", world.config.clone()),
        (
            "file under a closed folder",
            world.top.join("closed/open-file"),
        ),
    ];
    let mut tools = Vec::new();
    for (n, (_, path)) in targets.iter().enumerate() {
        let path = path.display();
        // `env` runs the loader, which runs `cat` on the path (no shell needed).
        tools.push((
            format!("loader{n}"),
            format!("#!/usr/bin/env -S -u {path} {loader} /bin/cat {path}\n"),
            "",
        ));
        // With `shell: true`, `--split-string` runs `sh -c 'cat path'`.
        tools.push((
            format!("split{n}"),
            format!("#!/usr/bin/env --split-string=-u {path} sh -c 'cat {path}'\n"),
            "permission: {shell: true}",
        ));
        // The path itself as the interpreter.
        tools.push((format!("direct{n}"), format!("#!{path}\n"), ""));
    }
    let specs: Vec<(&str, Option<&str>, &str, &str)> = tools
        .iter()
        .map(|(name, entry, yaml)| (name.as_str(), Some(entry.as_str()), "[./run]", *yaml))
        .collect();
    world.package("shebang", "permissions: {shell: true}", &specs);
    for (name, _, _, _) in &specs {
        let (value, text, _) = world.call(&format!("shebang.{name}"), &[]);
        eprintln!("{name:<10} {}", text.chars().take(200).collect::<String>());
        assert_eq!(value["outcome"]["status"], "error", "{name}: {text}");
        assert!(
            !text.contains(&world.canary) && !text.contains("SQLite format 3"),
            "{name}: BREACH, a hidden file was read: {text}"
        );
    }
}

/// Issue 22 item 15, the class: a package folder reached through a link in a root into the
/// state folder (here another package's data folder, which that package can fill with a
/// `quiver.yaml` and a tool) was mounted back as the package's own, showing that data.
#[test]
fn regression_issue_22_a_package_folder_among_the_data_folders_is_not_run() {
    let Some(world) = world() else { return };
    let victim = world.home.join("data/victim");
    let tool = victim.join("tools/t");
    std::fs::create_dir_all(&tool).unwrap();
    std::fs::write(tool.join("run"), READER).unwrap();
    std::fs::set_permissions(tool.join("run"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        tool.join("tool.yaml"),
        "name: t\ndescription: Reads the folder it was loaded from.\ncategory: perception\napproval: never\nexpose: true\nrun: {command: [./run, ../../canary.txt]}\n",
    )
    .unwrap();
    std::fs::write(
        victim.join("quiver.yaml"),
        "id: sneaky\nname: sneaky\nversion: 1.0.0\ndescription: A package in another one's data\n",
    )
    .unwrap();
    std::fs::create_dir_all(&world.packages).unwrap();
    std::os::unix::fs::symlink(&victim, world.packages.join("sneaky")).unwrap();
    let (value, text, _) = world.call("sneaky.t", &[]);
    eprintln!("{}", text.chars().take(300).collect::<String>());
    assert!(
        !text.contains(&world.canary),
        "BREACH, another package's data was read: {text}"
    );
    assert_ne!(value["outcome"]["status"], "ok", "{text}");
}

/// A tool that prints, as one JSON object, the start of each file named in its arguments, or
/// the error reading it.
const READER: &str = r#"#!/usr/bin/python3
import json, sys
out = {}
for path in sys.argv[1:]:
    try:
        out[path] = open(path, "rb").read(64).decode("latin-1")
    except OSError as e:
        out[path] = "error: " + str(e.errno)
print(json.dumps(out))
"#;

/// Issue 22 item 10: a state database given with `--db` outside the state folder was created
/// `0644` and a package granted its folder read it. Now it and its `-wal`/`-shm` are `0600`
/// and no tool sees them.
#[test]
fn regression_issue_22_a_db_outside_the_state_folder_is_private_and_hidden() {
    let Some(world) = world() else { return };
    let elsewhere = world.top.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let db = elsewhere.join("quiver.db");
    let grant = format!(
        "permission:\n  filesystem: {{read: [{}]}}",
        elsewhere.display()
    );
    let files = ["", "-wal", "-shm"]
        .iter()
        .map(|s| format!("{}{s}", db.display()))
        .collect::<Vec<_>>();
    // The secrets the MCP front keeps beside the database, and the agent configuration.
    let secrets = ["mcp-token", "mcp-secret", "agent.yaml"].map(|name| elsewhere.join(name));
    for secret in &secrets {
        std::fs::write(secret, &world.canary).unwrap();
    }
    let read = files
        .iter()
        .cloned()
        .chain(secrets.iter().map(|s| s.display().to_string()))
        .collect::<Vec<_>>()
        .join(", ");
    world.package(
        "reader",
        &grant.replacen("permission:", "permissions:", 1),
        &[("t", Some(READER), &format!("[./run, {read}]"), &grant)],
    );
    let (value, text, _) = world.call_with(
        "reader.t",
        &["--db", db.to_str().unwrap()],
        &[("QUIVER_AGENT_CONFIG", &secrets[2])],
    );
    eprintln!("{}", text.chars().take(300).collect::<String>());
    assert_eq!(value["outcome"]["status"], "ok", "{text}");
    assert!(
        !text.contains("SQLite format 3") && !text.contains(&world.canary),
        "BREACH, the database or a secret beside it was read: {text}"
    );
    for file in &files {
        let mode = std::fs::metadata(file).map(|m| m.permissions().mode() & 0o777);
        if let Ok(mode) = mode {
            assert_eq!(mode, 0o600, "{file}");
        }
    }
    assert!(Path::new(&files[0]).exists());
}

/// Issue 22 item 14: a tool that times out after 1 s was killed after 2.2 s (the runtime
/// waited for the killed launcher's children to be reaped by whoever adopted them). The call
/// now ends within half a second of its timeout beyond what a call that does nothing takes.
#[test]
fn regression_issue_22_a_timeout_kills_on_time() {
    let Some(world) = world() else { return };
    world.package("fast", "", &[("t", None, "[/bin/true]", "")]);
    world.package(
        "slow",
        "",
        &[(
            "t",
            Some("#!/usr/bin/python3\nimport time\ntime.sleep(30)\n"),
            "[./run]",
            "timeout: 1",
        )],
    );
    let (warm, text, _) = world.call("slow.t", &[]);
    assert_eq!(warm["outcome"]["status"], "timed_out", "{text}");
    let (_, _, baseline) = world.call("fast.t", &[]);
    let (value, text, took) = world.call("slow.t", &[]);
    assert_eq!(value["outcome"]["status"], "timed_out", "{text}");
    let bound = Duration::from_millis(1500) + baseline;
    assert!(
        took < bound,
        "killed after {took:?}, over {bound:?} (a call that does nothing: {baseline:?})"
    );
}
