//! Issue 13, class 6 (aggregate limits), the declared part: a tool's `limits:` in its
//! `tool.yaml` lowers the sandbox's defaults, or raises them within the operator's ceiling
//! (`limits.ceiling` in the config file), and the CPU limit holds. Through `quiver call` with
//! a SQLite state folder; skipped where the machine cannot sandbox or has no memory or CPU
//! cgroup controller.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// What the tools do: take memory (touching every page), or spin on the CPU, then print
/// what they used.
const MAIN: &str = r#"
import json, sys, time
mode, amount = sys.argv[1], float(sys.argv[2])
if mode == "memory":
    block = b"x" * int(amount * 1024 * 1024)
    print(json.dumps({"held_mib": len(block) >> 20}))
else:
    start, cpu = time.monotonic(), time.process_time()
    while time.monotonic() - start < amount:
        pass
    wall = time.monotonic() - start
    print(json.dumps({"share": (time.process_time() - cpu) / wall}))
"#;

struct World {
    _dir: tempfile::TempDir,
    home: PathBuf,
    packages: PathBuf,
    config: PathBuf,
}

/// One tool of package `hog`: what it does (`memory, MiB` or `cpu, seconds`) and its extra
/// `tool.yaml` lines.
fn tool(world: &World, name: &str, args: &str, yaml: &str) {
    let (mode, amount) = args.split_once(", ").unwrap();
    let dir = world.packages.join("hog/tools").join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("main.py"), MAIN).unwrap();
    std::fs::write(
        dir.join("tool.yaml"),
        format!("name: {name}\ndescription: Uses resources.\ncategory: perception\napproval: never\nexpose: true\ntimeout: 30\n{yaml}\nrun: {{command: [python3, main.py, {mode}, '{amount}']}}\n"),
    )
    .unwrap();
}

fn new_world(config: &str) -> Option<World> {
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
        _dir: dir,
    };
    std::fs::create_dir_all(world.packages.join("hog")).unwrap();
    std::fs::write(
        world.packages.join("hog/quiver.yaml"),
        "id: hog\nname: hog\nversion: 1.0.0\ndescription: Takes what it is given\n",
    )
    .unwrap();
    std::fs::write(&world.config, config).unwrap();
    Some(world)
}

impl World {
    /// `quiver call hog.<tool>`: its outcome, and its stderr.
    fn call(&self, tool: &str) -> (Value, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_quiver"))
            .arg("--root")
            .arg(&self.packages)
            .args(["call", &format!("hog.{tool}"), "--args", "{}", "--yes"])
            .env("QUIVER_HOME", &self.home)
            .env("QUIVER_CONFIG", &self.config)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let value: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{tool}: {e}: {} {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (
            value["outcome"].clone(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

/// Whether this machine has the cgroup controller `name` for the sandbox (it says so in a
/// warning when it has not).
fn has_controller(stderr: &str, limit: &str) -> bool {
    if stderr.contains(&format!("no cgroup controller for {limit}")) {
        eprintln!("SKIPPED: this machine has no cgroup controller for {limit}");
        return false;
    }
    true
}

fn text(outcome: &Value) -> String {
    outcome["content"].to_string()
}

#[test]
fn a_tool_that_asks_for_less_memory_is_held_to_it_and_one_that_asks_too_much_gets_the_ceiling() {
    // No ceiling in the config file: the defaults are the ceiling.
    let Some(world) = new_world("runtime:\n  allow_unsandboxed: false\n") else {
        return;
    };
    tool(&world, "plain", "memory, 100", "");
    tool(&world, "low", "memory, 100", "limits: {memory: 32MiB}");
    tool(&world, "greedy", "memory, 1200", "limits: {memory: 8GiB}");
    let (plain, stderr) = world.call("plain");
    if !has_controller(&stderr, "the memory limit of a call") {
        return;
    }
    assert_eq!(
        plain["status"], "ok",
        "the default lets 100 MiB run: {plain}"
    );
    assert_eq!(plain["content"]["held_mib"], 100);
    let (low, _) = world.call("low");
    assert_eq!(low["status"], "error", "{low}");
    assert!(
        text(&low).contains("went over its memory limit of 32 MiB"),
        "{low}"
    );
    // 8 GiB asked, over the default ceiling of 1 GiB: it gets 1 GiB, so 1.2 GiB is killed.
    let (greedy, stderr) = world.call("greedy");
    assert!(
        text(&greedy).contains("went over its memory limit of 1024 MiB"),
        "{greedy}"
    );
    assert!(
        stderr.contains("`limits.memory` of 8192 MiB is over the operator's ceiling of 1024 MiB"),
        "the clamp is named in a warning: {stderr}"
    );

    // The operator's ceiling set below the default: it lowers the default, and a tool asking
    // for more than it gets it.
    let Some(world) = new_world("limits:\n  ceiling:\n    memory: 64MiB\n") else {
        return;
    };
    tool(&world, "plain", "memory, 100", "");
    tool(&world, "greedy", "memory, 100", "limits: {memory: 512MiB}");
    tool(&world, "small", "memory, 20", "limits: {memory: 48MiB}");
    for name in ["plain", "greedy"] {
        let (outcome, _) = world.call(name);
        assert!(
            text(&outcome).contains("went over its memory limit of 64 MiB"),
            "{name}: {outcome}"
        );
    }
    let (small, _) = world.call("small");
    assert_eq!(small["status"], "ok", "{small}");
}

#[test]
fn a_busy_loop_under_a_small_cpu_limit_is_throttled_and_cpu_seconds_stop_it() {
    let Some(world) = new_world("limits:\n  ceiling:\n    cpu: 2\n") else {
        return;
    };
    tool(&world, "spin", "cpu, 1.5", "limits: {cpu: 0.05}");
    tool(&world, "free", "cpu, 1.5", "");
    tool(&world, "forever", "cpu, 20", "limits: {cpu_seconds: 1}");
    let (spin, stderr) = world.call("spin");
    if !has_controller(&stderr, "the CPU limit of a call") {
        return;
    }
    assert_eq!(spin["status"], "ok", "{spin}");
    let throttled = spin["content"]["share"].as_f64().unwrap();
    assert!(
        throttled < 0.2,
        "a twentieth of a core, but it had {throttled:.2} of one"
    );
    // The same loop without the limit gets more, though on a machine busy with other work
    // (a CI run shares two cores) it may get far less than a core: the best of three runs. On
    // a machine loaded past twice its cores even an unlimited loop may get no more than the
    // limit, so the comparison says so and stands aside (the bound above still holds).
    if overloaded() {
        eprintln!(
            "the machine is loaded past twice its cores: the unlimited comparison is skipped"
        );
    } else {
        let mut best = 0.0_f64;
        for _ in 0..3 {
            let (free, _) = world.call("free");
            best = best.max(free["content"]["share"].as_f64().unwrap());
            if best > 2.0 * throttled {
                break;
            }
        }
        assert!(
            best > 2.0 * throttled,
            "without the limit {best:.2}, with it {throttled:.2}"
        );
    }
    // One CPU second, then the kernel stops it, long before its 20 s loop or its timeout.
    let started = Instant::now();
    let (forever, _) = world.call("forever");
    assert_eq!(forever["status"], "error", "{forever}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

/// Whether the one-minute load average is over twice the cores (`/proc/loadavg`).
fn overloaded() -> bool {
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse::<f64>().ok())
        .unwrap_or(0.0);
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    load > 2.0 * cores as f64
}
