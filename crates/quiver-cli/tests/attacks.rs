//! The attack suite of issue 13 (isolation against a hostile package): a C probe
//! (`tests/attacks/probe.c`, compiled here with this run's paths and canary) tries each class
//! of attack as a package tool, through a real `quiver call` with a SQLite store in the state
//! folder. Each attack checks the call's outcome, its audit record, and that the random canary
//! planted outside the tool's reach never shows up; after all of them an ordinary call still
//! runs. Where the machine cannot sandbox (or has no C compiler) it prints why and skips.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

const EPERM: i64 = 1;
const ENOENT: i64 = 2;
const EACCES: i64 = 13;

/// One run's world: a folder holding the state folder, the packages, the config file, the
/// probe and a canary server socket.
struct World {
    _dir: tempfile::TempDir,
    top: PathBuf,
    home: PathBuf,
    packages: PathBuf,
    config: PathBuf,
    canary: String,
}

/// What one `quiver call` left: exit code, its JSON, stderr, and its audit record.
struct Call {
    code: Option<i32>,
    value: Value,
    stderr: String,
    audit: Value,
}

impl Call {
    fn content(&self) -> &Value {
        &self.value["outcome"]["content"]
    }

    fn status(&self) -> &str {
        self.value["outcome"]["status"].as_str().unwrap_or("")
    }

    fn text(&self) -> String {
        format!("{} {}", self.value, self.stderr)
    }
}

fn canary() -> String {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .unwrap()
        .read_exact(&mut bytes)
        .unwrap();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `tools` of package `id` (name, probe mode, extra tool.yaml), with `permissions` as its
/// ceiling in `quiver.yaml`.
fn package(world: &World, probe: &Path, id: &str, permissions: &str, tools: &[(&str, &str, &str)]) {
    let dir = world.packages.join(id);
    for (name, mode, yaml) in tools {
        let tool = dir.join("tools").join(name);
        std::fs::create_dir_all(&tool).unwrap();
        std::fs::copy(probe, tool.join("probe")).unwrap();
        std::fs::write(
            tool.join("tool.yaml"),
            format!("name: {name}\ndescription: Tries one attack of the suite.\ncategory: perception\napproval: never\nexpose: true\n{yaml}\nrun: {{command: [./probe, {mode}]}}\n"),
        )
        .unwrap();
    }
    std::fs::write(
        dir.join("quiver.yaml"),
        format!("id: {id}\nname: {id}\nversion: 1.0.0\ndescription: A hostile package of the attack suite\n{permissions}\n"),
    )
    .unwrap();
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
    std::fs::write(
        world.config.clone(),
        format!(
            "runtime:\n  allow_unsandboxed: false\n# database password: {}\n",
            world.canary
        ),
    )
    .unwrap();
    std::fs::write(world.home.join("data/victim/canary.txt"), &world.canary).unwrap();
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/attacks/probe.c");
    let probe = world.top.join("probe");
    let define = |name: &str, value: &Path| format!("-D{name}=\"{}\"", value.display());
    let compiled = Command::new("gcc")
        .args(["-O1", "-o"])
        .arg(&probe)
        .arg(&source)
        .arg(define("STATE_DB", &world.home.join("state.db")))
        .arg(define("HOME_DIR", &world.home))
        .arg(define("CONFIG_FILE", &world.config))
        .arg(define(
            "VICTIM_FILE",
            &world.home.join("data/victim/canary.txt"),
        ))
        .arg(define(
            "SECRET_FILE",
            &world.home.join("data/attacker/secret"),
        ))
        .arg(define("CANARY_SOCK", &world.top.join("canary.sock")))
        .status();
    if !compiled.is_ok_and(|s| s.success()) {
        eprintln!("SKIPPED: no C compiler (gcc) to build the attack probe");
        return None;
    }
    let attacks: &[(&str, &str, &str)] = &[
        ("normal", "normal", ""),
        ("sockets", "sockets", ""),
        ("i386", "i386", ""),
        ("caps", "caps", ""),
        ("view", "view", ""),
        ("fds", "fds", ""),
        ("uid", "uid", ""),
        ("memory", "memory", "timeout: 30"),
        ("pids", "pids", "timeout: 30"),
        ("tmp", "tmp", "timeout: 30"),
        ("disk", "disk", "timeout: 60"),
        ("sleep", "sleep", ""),
    ];
    package(&world, &probe, "attacker", "", attacks);
    let top = world.top.display();
    package(
        &world,
        &probe,
        "grabby",
        &format!("permissions:\n  filesystem: {{read: [{top}], write: [{top}]}}"),
        &[(
            "view",
            "view",
            &format!("permission:\n  filesystem: {{read: [{top}], write: [{top}]}}"),
        )],
    );
    package(&world, &probe, "victim", "", &[("normal", "normal", "")]);
    package(&world, &probe, "hog", "", &[("hog", "hog", "timeout: 30")]);
    package(&world, &probe, "forker", "", &[("forker", "forker", "")]);
    Some(world)
}

impl World {
    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_quiver"));
        command
            .arg("--root")
            .arg(&self.packages)
            .args(args)
            .env("QUIVER_HOME", &self.home)
            .env("QUIVER_CONFIG", &self.config)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }

    fn start(&self, tool: &str) -> Child {
        self.command(&["call", tool, "--args", "{}", "--yes"])
            .spawn()
            .unwrap()
    }

    /// `quiver call tool`, with `fd9` (a file) open as descriptor 9 when given.
    fn call(&self, tool: &str, fd9: Option<&Path>) -> Call {
        let out = match fd9 {
            None => self.start(tool).wait_with_output().unwrap(),
            Some(file) => {
                let plain = self.command(&["call", tool, "--args", "{}", "--yes"]);
                let mut command = Command::new("bash");
                command
                    .arg("-c")
                    .arg("exec 9<\"$0\"; exec \"$@\"")
                    .arg(file)
                    .arg(plain.get_program())
                    .args(plain.get_args())
                    .envs(plain.get_envs().filter_map(|(k, v)| Some((k, v?))))
                    .stdin(Stdio::null());
                command.output().unwrap()
            }
        };
        self.finish(tool, out)
    }

    fn finish(&self, tool: &str, out: std::process::Output) -> Call {
        let value: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{tool}: {e}: {} {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        let audit = self
            .command(&["audit", "--json", "--limit", "50"])
            .output()
            .unwrap();
        let records: Value = serde_json::from_slice(&audit.stdout).unwrap();
        let call_id = &value["outcome"]["call_id"];
        let audit = records
            .as_array()
            .unwrap()
            .iter()
            .find(|r| &r["call_id"] == call_id)
            .cloned()
            .unwrap_or_else(|| panic!("{tool}: no audit record of call {call_id}: {records}"));
        assert_eq!(audit["tool"], Value::from(tool), "{tool}: {audit}");
        Call {
            code: out.status.code(),
            value,
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            audit,
        }
    }

    /// Regular files anywhere under the state folder's `run/`.
    fn files_in_run(&self) -> Vec<PathBuf> {
        let mut found = Vec::new();
        let mut stack = vec![self.home.join("run")];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let kind = entry.file_type().unwrap();
                if kind.is_dir() {
                    stack.push(entry.path());
                } else if kind.is_file() {
                    found.push(entry.path());
                }
            }
        }
        found
    }
}

/// A Unix socket outside the tool's reach that hands the canary to whoever connects.
fn canary_server(world: &World) {
    let listener = UnixListener::bind(world.top.join("canary.sock")).unwrap();
    let canary = world.canary.clone();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let _ = stream.write_all(canary.as_bytes());
        }
    });
}

fn errno(call: &Call, field: &str) -> i64 {
    call.content()[field]
        .as_i64()
        .unwrap_or_else(|| panic!("no `{field}` in {}", call.text()))
}

/// Checks what every attack must leave: the expected status in the outcome and the audit
/// record, and no canary anywhere.
fn check(world: &World, name: &str, call: &Call, status: &str) {
    eprintln!(
        "{name:<28} exit {:<4} outcome {:<8} audit {:<8} {}",
        call.code.map(|c| c.to_string()).unwrap_or_default(),
        call.status(),
        call.audit["status"].as_str().unwrap_or(""),
        call.content()
            .to_string()
            .chars()
            .take(160)
            .collect::<String>()
    );
    assert_eq!(call.status(), status, "{name}: {}", call.text());
    assert_eq!(
        call.audit["status"],
        Value::from(status),
        "{name}: audit {}",
        call.audit
    );
    assert!(
        !call.text().contains(&world.canary),
        "{name}: BREACH, the canary leaked: {}",
        call.text()
    );
}

#[test]
fn attack_suite() {
    let Some(world) = world() else { return };
    canary_server(&world);
    // Leftovers of a runtime that died: removed at start.
    let stale = world.home.join("run/sandbox-999999999-0");
    std::fs::create_dir_all(&stale).unwrap();
    std::fs::write(stale.join("policy-x.json"), &world.canary).unwrap();

    let first = world.call("attacker.normal", None);
    check(&world, "normal call", &first, "ok");
    assert!(
        !stale.exists(),
        "a dead runtime's run/ folder is removed at start"
    );

    // 1. Sockets: io_uring, every family without network, x32 numbers; the i386 entry kills.
    let call = world.call("attacker.sockets", None);
    check(&world, "1 sockets and io_uring", &call, "ok");
    for field in [
        "io_uring_setup",
        "unix",
        "vsock",
        "netlink",
        "packet",
        "inet",
        "inet6",
        "x32_socket",
    ] {
        assert_eq!(errno(&call, field), EPERM, "{field}: {}", call.text());
    }
    let call = world.call("attacker.i386", None);
    check(&world, "1 i386 entry", &call, "error");
    assert!(!call.text().contains("survived"), "{}", call.text());

    // 2. Capabilities: none in any set, no_new_privs, a root-owned 0600 file stays closed.
    let secret = world.home.join("data/attacker/secret");
    std::fs::write(&secret, &world.canary).unwrap();
    std::os::unix::fs::chown(&secret, Some(0), Some(0)).unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let call = world.call("attacker.caps", None);
    check(&world, "2 capabilities", &call, "ok");
    for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert_eq!(
            call.content()[set],
            Value::from(0),
            "{set}: {}",
            call.text()
        );
    }
    assert_eq!(call.content()["NoNewPrivs"], Value::from(1));
    assert_eq!(errno(&call, "secret"), EACCES, "{}", call.text());
    assert_eq!(errno(&call, "chmod_secret"), EPERM, "{}", call.text());
    assert_eq!(std::fs::metadata(&secret).unwrap().mode() & 0o777, 0o600);

    // 3. The mount view: nothing of the host beyond what is granted, own /proc; a grant of
    //    the folder holding the state folder and the config file still shows neither.
    let call = world.call("attacker.view", None);
    check(&world, "3 mount view", &call, "ok");
    // (The state folder itself exists, empty but for the package's own data folder: its
    // data folder is mounted at the path it has on the host.)
    for field in [
        "stat_state_db",
        "stat_config",
        "stat_root_home",
        "victim",
        "config",
        "write_victim",
    ] {
        assert_eq!(errno(&call, field), ENOENT, "{field}: {}", call.text());
    }
    assert_eq!(
        call.content()["processes"],
        Value::from(1),
        "only the tool in its /proc"
    );
    assert_eq!(
        call.content()["host"],
        serde_json::json!([]),
        "host paths visible: {}",
        call.text()
    );
    let call = world.call("grabby.view", None);
    check(&world, "3 parent folder granted", &call, "ok");
    assert_eq!(errno(&call, "stat_state_db"), ENOENT, "{}", call.text());
    assert_eq!(errno(&call, "victim"), ENOENT, "{}", call.text());
    assert_eq!(errno(&call, "write_victim"), ENOENT, "{}", call.text());
    assert_eq!(
        call.content()["config"],
        Value::from(""),
        "the config file reads empty: {}",
        call.text()
    );
    assert_eq!(
        std::fs::read_to_string(world.home.join("data/victim/canary.txt")).unwrap(),
        world.canary
    );

    // 4. Descriptors: `quiver call ... 9<canary` gives the tool nothing above 2.
    let canary_file = world.top.join("fd9.txt");
    std::fs::write(&canary_file, &world.canary).unwrap();
    let call = world.call("attacker.fds", Some(&canary_file));
    check(&world, "4 inherited descriptor", &call, "ok");
    assert_eq!(
        call.content()["open"],
        serde_json::json!([]),
        "{}",
        call.text()
    );

    // 5. Identity: the package's own uid, owning its data folder; one package's processes
    //    do not stop another's.
    let call = world.call("attacker.uid", None);
    check(&world, "5 own uid", &call, "ok");
    let uid = quiver_sandbox::identity::package_uid("attacker");
    assert_eq!(call.content()["uid"], Value::from(uid));
    assert_ne!(uid, quiver_sandbox::identity::package_uid("victim"));
    assert_eq!(
        std::fs::metadata(world.home.join("data/attacker"))
            .unwrap()
            .uid(),
        uid
    );
    let hog = world.start("hog.hog");
    std::thread::sleep(Duration::from_millis(2500));
    let call = world.call("forker.forker", None);
    check(&world, "5 fork while another hogs", &call, "ok");
    assert_eq!(call.content()["forked"], Value::from(20), "{}", call.text());
    let hog = world.finish("hog.hog", hog.wait_with_output().unwrap());
    check(&world, "5 the hog", &hog, "ok");
    assert!(
        hog.content()["forked"].as_i64().unwrap() < 200,
        "{}",
        hog.text()
    );

    // 6. Aggregate limits: memory of all processes, tasks, the private /tmp, the disk budget.
    let call = world.call("attacker.memory", None);
    check(&world, "6 memory of 4 children", &call, "error");
    assert!(call.text().contains("memory limit"), "{}", call.text());
    let call = world.call("attacker.pids", None);
    check(&world, "6 tasks", &call, "ok");
    assert!(
        call.content()["forked"].as_i64().unwrap() < 128,
        "{}",
        call.text()
    );
    let call = world.call("attacker.tmp", None);
    check(&world, "6 private /tmp", &call, "ok");
    assert!(
        call.content()["mib"].as_i64().unwrap() <= 64,
        "{}",
        call.text()
    );
    let call = world.call("attacker.disk", None);
    check(&world, "6 disk budget", &call, "error");
    assert!(call.text().contains("disk budget"), "{}", call.text());
    let call = world.call("attacker.normal", None);
    check(&world, "6 over the budget: refused", &call, "error");
    assert!(
        call.text().contains("over its disk budget"),
        "{}",
        call.text()
    );
    for entry in std::fs::read_dir(world.home.join("data/attacker"))
        .unwrap()
        .flatten()
    {
        if entry.file_name().to_string_lossy().starts_with("fill-") {
            std::fs::remove_file(entry.path()).unwrap();
        }
    }

    // 14. The policy (the package's settings) never touches the disk.
    let sleeper = world.start("attacker.sleep");
    std::thread::sleep(Duration::from_millis(1000));
    let files = world.files_in_run();
    let sleeper = world.finish("attacker.sleep", sleeper.wait_with_output().unwrap());
    check(&world, "14 no policy file", &sleeper, "ok");
    assert_eq!(
        files,
        Vec::<PathBuf>::new(),
        "files under run/ during a call"
    );

    let last = world.call("victim.normal", None);
    check(&world, "a normal call afterwards", &last, "ok");
    assert_eq!(last.content()["ok"], Value::from(true));
}
