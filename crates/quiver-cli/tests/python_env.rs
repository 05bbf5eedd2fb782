//! Issue 24 item 5: a package's `requirements.txt` is installed by `quiver install` into the
//! package's own Python environment, and its tools run there, through the built binary and the
//! real sandbox: the tool imports a module from a wheel built in the test (`--wheels`, no
//! network); another package cannot see that environment; a missing environment fails the call
//! rather than running with the system's Python; unpinned requirements are refused with their
//! line; a killed install leaves the old state and a staging folder the next install removes.
//! Skips where the machine cannot sandbox or make environments.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

#[path = "../../quiver-install/tests/suite/wheel.rs"]
mod wheel;

/// The tool of `dated`: what it imported, and which interpreter ran it.
const SHOW_PY: &str = "import json\nimport sys\n\nimport quiverdemo\n\njson.load(sys.stdin)\nprint(json.dumps({\"value\": quiverdemo.VALUE, \"prefix\": sys.prefix, \"executable\": sys.executable}))\n";

/// The tool of `snoop`: lists the folder it is given, or says why it cannot.
const LOOK_PY: &str = "import json\nimport os\nimport sys\n\nfolder = json.load(sys.stdin)[\"arguments\"][\"folder\"]\ntry:\n    print(json.dumps({\"entries\": sorted(os.listdir(folder))}))\nexcept OSError as e:\n    print(json.dumps({\"error\": e.strerror}))\n";

/// The skill script of `dated`: the same, as text.
const WHICH_PY: &str = "import sys\n\nimport quiverdemo\n\nprint(quiverdemo.VALUE, sys.prefix)\n";

struct World {
    _dir: tempfile::TempDir,
    top: PathBuf,
}

impl World {
    /// `None` (with the reason printed) where the test cannot run.
    fn new() -> Option<World> {
        if let Err(why) = quiver_sandbox::support() {
            eprintln!("SKIPPED: the sandbox cannot run here: {why}");
            return None;
        }
        if !wheel::can_make_envs() {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let top = std::fs::canonicalize(dir.path()).unwrap();
        wheel::build_wheel(
            &top.join("wheels"),
            "quiverdemo",
            "1.0.0",
            "VALUE = '天气'\n",
            &[],
        );
        Some(World { _dir: dir, top })
    }

    fn state(&self) -> PathBuf {
        self.top.join("home")
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_quiver"));
        c.args(args)
            .current_dir(&self.top)
            .env("QUIVER_HOME", self.state())
            .env("HOME", &self.top)
            .env("QUIVER_CONFIG", self.top.join("no-config.yaml"))
            .env_remove("QUIVER_PATH")
            .env_remove("QUIVER_WHEELS")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null());
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    fn install(&self, folder: &Path) -> Output {
        let folder = folder.display().to_string();
        self.run(&[
            "install",
            &folder,
            "--allow-unsigned",
            "--yes",
            "--wheels",
            "wheels",
        ])
    }

    fn installed(&self, folder: &Path) {
        let out = self.install(folder);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// `quiver call tool` with `arguments`: the call's outcome.
    fn call(&self, tool: &str, arguments: &Value) -> Value {
        let out = self.run(&["call", tool, "--args", &arguments.to_string(), "--yes"]);
        let value: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{tool}: {e}: {}", String::from_utf8_lossy(&out.stderr)));
        value["outcome"].clone()
    }

    /// The content of a call that must succeed.
    fn ok(&self, tool: &str, arguments: &Value) -> Value {
        let outcome = self.call(tool, arguments);
        assert_eq!(outcome["status"], "ok", "{tool}: {outcome}");
        outcome["content"].clone()
    }

    /// The environment of the installed version of `id`.
    fn env_of(&self, id: &str) -> PathBuf {
        let list: Value =
            serde_json::from_slice(&std::fs::read(self.state().join("installed.json")).unwrap())
                .unwrap();
        let digest = list["packages"][id]["current"]["digest"].as_str().unwrap();
        self.state()
            .join("envs")
            .join(digest.trim_start_matches("sha256:"))
    }

    /// Writes package `id` at `version` with the tool `tool` running `source`, and
    /// `requirements` when given.
    fn package(
        &self,
        id: &str,
        version: &str,
        tool: (&str, &str),
        requirements: Option<&str>,
    ) -> PathBuf {
        let root = self.top.join(format!("src-{id}-{version}")).join(id);
        let dir = root.join("tools").join(tool.0);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            root.join("quiver.yaml"),
            format!("id: {id}\nname: {id}\nversion: {version}\ndescription: A test package\n"),
        )
        .unwrap();
        std::fs::write(
            dir.join("tool.yaml"),
            format!(
                "name: {}\ndescription: Tells what it sees.\ncategory: perception\napproval: never\nexpose: true\ninput:\n  type: object\n  properties:\n    folder: {{type: string}}\nrun: {{command: [python3, main.py]}}\n",
                tool.0
            ),
        )
        .unwrap();
        std::fs::write(dir.join("main.py"), tool.1).unwrap();
        if let Some(text) = requirements {
            std::fs::write(root.join("requirements.txt"), text).unwrap();
            // A skill whose script imports the requirement too.
            std::fs::create_dir_all(root.join("scripts")).unwrap();
            std::fs::write(
                root.join("SKILL.md"),
                format!("---\nname: {id}\ndescription: Tells the date. Use when asked for it.\n---\n\nRun `scripts/which.py`.\n"),
            )
            .unwrap();
            std::fs::write(root.join("scripts/which.py"), WHICH_PY).unwrap();
        }
        root
    }

    fn entries(&self, dir: &str) -> Vec<String> {
        std::fs::read_dir(self.state().join(dir))
            .map(|r| {
                r.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    }
}

#[test]
fn an_installed_packages_tool_imports_its_pinned_requirement_in_the_sandbox() {
    let Some(world) = World::new() else {
        return;
    };
    let dated = world.package(
        "dated",
        "1.0.0",
        ("show", SHOW_PY),
        Some("quiverdemo==1.0.0\n"),
    );
    let snoop = world.package("snoop", "1.0.0", ("look", LOOK_PY), None);
    world.installed(&dated);
    world.installed(&snoop);
    let env = world.env_of("dated");

    // The tool runs in its environment: `python3` is the environment's, and the module is there.
    let shown = world.ok("dated.show", &json!({}));
    assert_eq!(shown["value"], "天气", "{shown}");
    assert_eq!(shown["prefix"], env.display().to_string(), "{shown}");
    assert_eq!(
        shown["executable"],
        env.join("bin/python3").display().to_string()
    );

    // Its skill's scripts run there too (`run_skill_script`, in a session that read the skill).
    let opened = world.run(&[
        "call",
        "read_skill",
        "--args",
        r#"{"id": "dated"}"#,
        "--yes",
    ]);
    let opened: Value = serde_json::from_slice(&opened.stdout).unwrap();
    let session = opened["session"].as_str().unwrap();
    let script = world.run(&[
        "call",
        "run_skill_script",
        "--session",
        session,
        "--args",
        r#"{"skill": "dated", "script": "which.py"}"#,
        "--yes",
    ]);
    let script: Value = serde_json::from_slice(&script.stdout).unwrap();
    assert_eq!(
        script["outcome"]["content"]["stdout"],
        format!("天气 {}\n", env.display()),
        "{script}"
    );

    // Another package sees neither that environment nor the others: in its view the state
    // folder holds only the way to its own folders (`data`, `store`).
    for folder in [env.clone(), world.state().join("envs")] {
        let seen = world.ok("snoop.look", &json!({"folder": folder}));
        assert_eq!(
            seen,
            json!({"error": "No such file or directory"}),
            "{}",
            folder.display()
        );
    }
    let seen = world.ok("snoop.look", &json!({"folder": world.state()}));
    assert_eq!(seen, json!({"entries": ["data", "store"]}));

    // Without its environment the tool does not run with the system's Python: it fails and
    // says what to do; installing again builds the environment again.
    Command::new("chmod")
        .arg("-R")
        .arg("u+w")
        .arg(&env)
        .status()
        .unwrap();
    std::fs::remove_dir_all(&env).unwrap();
    let failed = world.call("dated.show", &json!({}));
    assert_ne!(failed["status"], "ok", "{failed}");
    assert!(failed.to_string().contains("quiver install"), "{failed}");
    world.installed(&dated);
    assert_eq!(world.ok("dated.show", &json!({}))["value"], "天气");

    // Unpinned requirements are refused with the file and line, and nothing is installed.
    let loose = world.package(
        "loose",
        "1.0.0",
        ("show", SHOW_PY),
        Some("quiverdemo==1.0.0\nrequests>=2\n"),
    );
    let out = world.install(&loose);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("requirements-unpinned"), "{stderr}");
    assert!(stderr.contains("requirements.txt:2"), "{stderr}");
    assert_eq!(world.entries("envs").len(), 1);

    // A missing wheel: refused, naming it; nothing of it is left.
    let absent = world.package(
        "absent",
        "1.0.0",
        ("show", SHOW_PY),
        Some("quiverabsent==3.1\n"),
    );
    let out = world.install(&absent);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("quiverabsent==3.1"), "{stderr}");
    assert_eq!(world.entries("envs").len(), 1);
    assert_eq!(world.entries("store").len(), 2);
    assert_eq!(world.entries("staging"), Vec::<String>::new());

    // `uninstall --purge` takes the environment away with the package.
    assert!(
        world
            .run(&["uninstall", "dated", "--purge"])
            .status
            .success()
    );
    assert_eq!(world.entries("envs"), Vec::<String>::new());
}

#[test]
fn a_crashed_install_leaves_staging_that_the_next_one_removes() {
    use std::os::unix::process::ExitStatusExt;
    let Some(world) = World::new() else {
        return;
    };
    let v1 = world.package(
        "dated",
        "1.0.0",
        ("show", SHOW_PY),
        Some("quiverdemo==1.0.0\n"),
    );
    let v2 = world.package(
        "dated",
        "1.1.0",
        ("show", SHOW_PY),
        Some("quiverdemo==1.0.0\n"),
    );
    world.installed(&v1);
    let before = std::fs::read(world.state().join("installed.json")).unwrap();
    for step in ["staged", "environment"] {
        let v2 = v2.display().to_string();
        let out = world
            .command(&[
                "install",
                &v2,
                "--allow-unsigned",
                "--yes",
                "--wheels",
                "wheels",
            ])
            .env("QUIVER_TEST_CRASH_AFTER", step)
            .output()
            .unwrap();
        assert_eq!(out.status.signal(), Some(6), "{step}: not aborted: {out:?}");
        // The old state: the same list, its environment complete, the tool running.
        assert_eq!(
            std::fs::read(world.state().join("installed.json")).unwrap(),
            before,
            "{step}"
        );
        assert!(
            world.env_of("dated").join(".quiver-complete").is_file(),
            "{step}"
        );
        assert_eq!(
            world.ok("dated.show", &json!({}))["value"],
            "天气",
            "{step}"
        );
        // The killed install's staging folder and its lock are left behind.
        assert_eq!(
            world.entries("staging").len(),
            2,
            "{step}: {:?}",
            world.entries("staging")
        );
    }
    // An unfinished environment is there too; the next install removes both and completes.
    assert_eq!(world.entries("envs").len(), 2);
    world.installed(&v2);
    assert_eq!(world.entries("staging"), Vec::<String>::new());
    assert_eq!(world.entries("envs").len(), 2);
    assert!(world.env_of("dated").join(".quiver-complete").is_file());
    assert_eq!(world.ok("dated.show", &json!({}))["value"], "天气");
}
