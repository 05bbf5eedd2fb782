//! `quiver keys`, `trust`, `pack`, `sign`, `verify`, `install`, `update`, `rollback`,
//! `uninstall`: the built binary on a temporary state folder.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        Env {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_quiver"));
        c.args(args)
            .current_dir(self.dir.path())
            .env("QUIVER_HOME", self.path("home"))
            .env("HOME", self.dir.path())
            .env_remove("QUIVER_PATH")
            .env_remove("QUIVER_CONFIG")
            .env("NO_COLOR", "1");
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn refused(&self, args: &[&str], want: &str) {
        let out = self.run(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains(want),
            "{args:?}: `{stderr}` should say `{want}`"
        );
    }

    /// A package `id` at `version` with `network` hosts, in a folder of its own.
    fn package(&self, id: &str, version: &str, network: &str) -> String {
        let dir = self.path(&format!("src-{id}-{version}")).join(id);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("quiver.yaml"),
            format!("id: {id}\nversion: {version}\ndescription: A test package\npermissions:\n  network: [{network}]\n"),
        )
        .unwrap();
        std::fs::write(
            dir.join("SKILL.md"),
            format!("---\nname: {id}\ndescription: Answers questions about {id}. Use when asked.\n---\n\nBody.\n"),
        )
        .unwrap();
        dir.display().to_string()
    }

    fn listed(&self) -> String {
        let out = self.run(&["list", "--json"]);
        String::from_utf8(out.stdout).unwrap()
    }
}

fn setup() -> (Env, String) {
    let env = Env::new();
    let key = env.ok(&["keys", "new", "acme"]).trim().to_owned();
    let line = env.ok(&["keys", "export", &key]);
    std::fs::write(env.path("acme.pub"), line).unwrap();
    env.ok(&["trust", "add", "acme.pub"]);
    (env, key)
}

#[test]
fn a_signed_package_goes_from_pack_to_the_catalog_and_out_with_its_key() {
    let (env, key) = setup();
    let src = env.package("echo", "1.0.0", "");
    env.ok(&["pack", &src, "--key", &key, "-o", "echo.qpkg"]);
    assert!(
        env.ok(&["verify", "echo.qpkg"])
            .starts_with("ok: acme/echo 1.0.0")
    );
    env.refused(&["install", "echo.qpkg"], "not installed");
    env.ok(&["install", "echo.qpkg", "--yes"]);
    assert!(env.listed().contains("\"echo\""), "{}", env.listed());
    assert!(env.ok(&["installed"]).contains("acme/echo\t1.0.0"));
    // `quiver serve` serves what is installed (not the bundled examples).
    let served = env.run(&["serve", "--stdio"]);
    let said = String::from_utf8_lossy(&served.stderr);
    assert!(said.contains("packages: 1 package;"), "{said}");
    let shown: serde_json::Value = serde_json::from_str(&env.ok(&["show", "echo"])).unwrap();
    assert_eq!(shown["can_do"]["installed"]["publisher"], "acme");
    assert_eq!(shown["can_do"]["installed"]["signed_by"][0], key.as_str());
    // Revoking the only key that signed it takes it out of the catalog.
    env.ok(&["trust", "revoke", &key]);
    assert!(!env.listed().contains("\"echo\""), "{}", env.listed());
    assert!(env.ok(&["installed"]).contains("disabled"));
    env.refused(&["verify", "echo.qpkg"], "revoked");
}

#[test]
fn an_escalating_update_needs_its_own_flag_and_yes_is_not_enough() {
    let (env, key) = setup();
    let v1 = env.package("echo", "1.0.0", "");
    let v2 = env.package("echo", "1.1.0", "api.example.com");
    env.ok(&["pack", &v1, "--key", &key, "-o", "v1.qpkg"]);
    env.ok(&["pack", &v2, "--key", &key, "-o", "v2.qpkg"]);
    env.ok(&["install", "v1.qpkg", "--yes"]);
    env.refused(
        &["update", "v2.qpkg", "--yes"],
        "+ network: api.example.com",
    );
    assert!(env.ok(&["installed"]).contains("1.0.0"));
    env.ok(&["update", "v2.qpkg", "--yes", "--accept-permissions"]);
    assert!(env.ok(&["installed"]).contains("1.1.0"));
    env.refused(&["install", "v1.qpkg", "--yes"], "older than the installed");
    env.ok(&["rollback", "echo"]);
    assert!(env.ok(&["installed"]).contains("1.0.0"));
    env.ok(&["uninstall", "echo", "--purge"]);
    assert_eq!(
        std::fs::read_dir(env.path("home/store")).unwrap().count(),
        0
    );
}

#[test]
fn folders_need_allow_unsigned_and_unsigned_packs_are_refused() {
    let (env, _) = setup();
    let src = env.package("echo", "1.0.0", "");
    env.refused(&["install", &src, "--yes"], "--allow-unsigned");
    env.ok(&["pack", &src, "--publisher", "acme", "-o", "u.qpkg"]);
    env.refused(&["install", "u.qpkg", "--yes"], "not signed");
    let out = env.run(&["install", &src, "--yes", "--allow-unsigned"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("UNSIGNED"));
    assert!(env.ok(&["installed"]).contains("local/echo\t1.0.0"));
    assert!(env.ok(&["installed"]).contains("unsigned"));
    assert!(env.ok(&["list"]).contains("echo  installed [unsigned]"));
}

#[test]
fn signing_later_gives_the_same_digest_and_a_tampered_file_is_refused() {
    let (env, key) = setup();
    let src = env.package("echo", "1.0.0", "");
    env.ok(&["pack", &src, "--publisher", "acme", "-o", "e.qpkg"]);
    env.ok(&["sign", "e.qpkg", "--key", &key]);
    env.ok(&["pack", &src, "--key", &key, "-o", "direct.qpkg"]);
    assert_eq!(
        std::fs::read(env.path("e.qpkg")).unwrap(),
        std::fs::read(env.path("direct.qpkg")).unwrap()
    );
    let mut bytes = std::fs::read(env.path("e.qpkg")).unwrap();
    let n = bytes.len();
    bytes[n - 12] ^= 0xff;
    std::fs::write(env.path("bad.qpkg"), bytes).unwrap();
    let out = env.run(&["install", "bad.qpkg", "--yes"]);
    assert!(!out.status.success());
    assert!(!Path::new(&env.path("home/installed.json")).exists());
}

#[test]
fn concurrent_installs_in_separate_processes_all_land() {
    let (env, key) = setup();
    let ids: Vec<String> = (0..6).map(|i| format!("pkg{i}")).collect();
    for id in &ids {
        let src = env.package(id, "1.0.0", "");
        env.ok(&["pack", &src, "--key", &key, "-o", &format!("{id}.qpkg")]);
    }
    let children: Vec<_> = ids
        .iter()
        .map(|id| {
            env.command(&["install", &format!("{id}.qpkg"), "--yes"])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let installed = env.ok(&["installed"]);
    for id in &ids {
        assert!(
            installed.contains(&format!("acme/{id}\t")),
            "{id} lost: {installed}"
        );
    }
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// A local repository of two plain Agent Skills folders; returns its URL and commit.
fn skills_repo(env: &Env) -> (String, String) {
    let repo = env.path("repo");
    for name in ["alpha", "beta"] {
        let dir = repo.join("skills").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("SKILL.md"),
            format!("---\nname: {name}\ndescription: The {name} skill. Use when asked about {name}.\n---\n\nBody.\n"),
        )
        .unwrap();
    }
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "skills"]);
    let commit = git(&repo, &["rev-parse", "HEAD"]);
    (format!("file://{}", repo.display()), commit)
}

#[test]
fn a_git_repository_of_skills_installs_one_package_per_skill_at_a_pinned_commit() {
    let env = Env::new();
    let (url, commit) = skills_repo(&env);
    let source = format!("git+{url}@{commit}");
    env.refused(
        &[
            "install",
            &format!("git+{url}@master"),
            "--yes",
            "--allow-unsigned",
        ],
        "not a full commit id",
    );
    env.refused(&["install", &source, "--yes"], "--allow-unsigned");
    env.ok(&[
        "install",
        &source,
        "--yes",
        "--allow-unsigned",
        "--skill",
        "beta",
    ]);
    let installed = env.ok(&["installed", "--json"]);
    assert!(
        installed.contains("\"beta\"") && !installed.contains("\"alpha\""),
        "{installed}"
    );
    assert!(installed.contains(&source), "{installed}");
    env.ok(&["install", &source, "--yes", "--allow-unsigned"]);
    assert!(env.ok(&["installed"]).contains("local/alpha"));
}

#[test]
fn a_skills_lock_json_is_read_as_sources() {
    let env = Env::new();
    let (url, commit) = skills_repo(&env);
    let local = env.package("mine", "1.0.0", "");
    let lock = format!(
        r#"{{"version": 1, "skills": {{
            "alpha": {{"source": "x/repo", "sourceType": "git", "sourceUrl": "{url}", "ref": "{commit}", "skillPath": "skills/alpha/SKILL.md", "computedHash": "00"}},
            "mine": {{"source": "{local}", "sourceType": "local", "computedHash": "00"}}
        }}}}"#
    );
    std::fs::write(env.path("skills-lock.json"), lock).unwrap();
    env.ok(&["install", "skills-lock.json", "--yes", "--allow-unsigned"]);
    let installed = env.ok(&["installed"]);
    assert!(
        installed.contains("local/alpha") && installed.contains("local/mine"),
        "{installed}"
    );
    assert!(!installed.contains("beta"), "{installed}");
}

#[test]
fn install_locked_refuses_anything_the_lock_file_does_not_record() {
    let (env, key) = setup();
    env.ok(&[
        "pack",
        &env.package("echo", "1.0.0", ""),
        "--key",
        &key,
        "-o",
        "v1.qpkg",
    ]);
    env.ok(&[
        "pack",
        &env.package("echo", "1.1.0", ""),
        "--key",
        &key,
        "-o",
        "v2.qpkg",
    ]);
    env.refused(
        &["install", "v1.qpkg", "--yes", "--locked"],
        "needs the lock file",
    );
    std::fs::write(env.path("quiver.lock"), r#"{"version": 1, "packages": {}}"#).unwrap();
    env.ok(&["install", "v1.qpkg", "--yes"]);
    let lock = std::fs::read_to_string(env.path("quiver.lock")).unwrap();
    assert!(lock.contains("\"1.0.0\""), "{lock}");
    env.refused(
        &["install", "v2.qpkg", "--yes", "--locked"],
        "the lock file says version `1.0.0`",
    );
    assert!(env.ok(&["installed"]).contains("1.0.0"));
    env.ok(&["uninstall", "echo", "--lockfile", "other.lock"]);
    env.ok(&["install", "v1.qpkg", "--yes", "--locked"]);
    env.ok(&["uninstall", "echo"]);
    let lock = std::fs::read_to_string(env.path("quiver.lock")).unwrap();
    assert!(!lock.contains("echo"), "{lock}");
}

#[test]
fn an_index_installs_by_name_and_warns_of_look_alike_ids() {
    let (env, key) = setup();
    std::fs::create_dir_all(env.path("idx")).unwrap();
    env.ok(&[
        "pack",
        &env.package("echo", "1.0.0", ""),
        "--key",
        &key,
        "-o",
        "idx/echo.qpkg",
    ]);
    let index_key = env.ok(&["keys", "new", "myindex"]).trim().to_owned();
    env.ok(&["index", "build", "idx", "--key", &index_key]);
    env.refused(
        &["install", "acme/echo@1.0.0", "--index", "idx", "--yes"],
        "trusted for indexes",
    );
    let line = env.ok(&["keys", "export", &index_key]);
    std::fs::write(env.path("index.pub"), line).unwrap();
    env.ok(&["trust", "add", "index.pub", "--scope", "@index"]);
    env.ok(&["install", "acme/echo@1.0.0", "--index", "idx", "--yes"]);
    assert!(env.ok(&["installed"]).contains("acme/echo\t1.0.0"));
    // Another publisher's look-alike id is installed with a warning.
    let out = env.run(&[
        "install",
        &env.package("ech0", "1.0.0", ""),
        "--allow-unsigned",
        "--yes",
    ]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("looks like the installed `acme/echo`"));
}

#[test]
fn a_running_serve_serves_what_is_installed_after_it_started() {
    let (env, key) = setup();
    for id in ["echo", "other"] {
        env.ok(&[
            "pack",
            &env.package(id, "1.0.0", ""),
            "--key",
            &key,
            "-o",
            &format!("{id}.qpkg"),
        ]);
    }
    env.ok(&["install", "echo.qpkg", "--yes"]);
    let mut serve = env
        .command(&["serve", "--stdio"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let reloaded = |env: &Env| {
        let out = env.run(&["reload", "--wait", "20"]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // The server is up once it answers a reload (a request made before it started is not
    // one it answers, so ask until it does).
    let started = std::time::Instant::now();
    loop {
        let out = env.run(&["reload", "--wait", "2"]);
        let said = String::from_utf8_lossy(&out.stdout).into_owned();
        if !said.is_empty() {
            assert!(said.starts_with("reloaded: 1 package(s)"), "{said}");
            break;
        }
        assert!(
            started.elapsed().as_secs() < 60,
            "quiver serve never answered"
        );
    }
    env.ok(&["install", "other.qpkg", "--yes"]);
    assert!(reloaded(&env).starts_with("reloaded: 2 package(s)"));
    env.ok(&["uninstall", "other"]);
    assert!(reloaded(&env).starts_with("reloaded: 1 package(s)"));
    serve.kill().unwrap();
    serve.wait().unwrap();
}

/// The state folder: where `installed.json` is, under the test's folder.
fn state_dir(root: &Path) -> Option<PathBuf> {
    for entry in std::fs::read_dir(root).ok()?.flatten() {
        let path = entry.path();
        if path.file_name().is_some_and(|n| n == "installed.json") {
            return Some(root.to_owned());
        }
        if path.is_dir()
            && let Some(found) = state_dir(&path)
        {
            return Some(found);
        }
    }
    None
}

#[test]
fn an_install_killed_after_any_step_leaves_the_old_or_the_new_state() {
    use std::os::unix::process::ExitStatusExt;
    let (env, key) = setup();
    for (version, name) in [("1.0.0", "v1.qpkg"), ("1.1.0", "v2.qpkg")] {
        let src = env.package("echo", version, "");
        env.ok(&["pack", &src, "--key", &key, "-o", name]);
    }
    env.ok(&["install", "v1.qpkg", "--yes"]);
    let state = state_dir(env.dir.path()).unwrap();
    for (step, now) in [
        ("staged", "1.0.0"),
        ("stored", "1.0.0"),
        ("listed", "1.1.0"),
    ] {
        let out = env
            .command(&["install", "v2.qpkg", "--yes"])
            .env("QUIVER_TEST_CRASH_AFTER", step)
            .output()
            .unwrap();
        assert_eq!(out.status.signal(), Some(6), "{step}: not aborted: {out:?}");
        // The list is the old one or the new one, and every folder it names is complete.
        let installed = env.ok(&["installed"]);
        assert!(
            installed.contains(&format!("acme/echo\t{now}")),
            "{step}: {installed}"
        );
        let list: serde_json::Value =
            serde_json::from_slice(&std::fs::read(state.join("installed.json")).unwrap()).unwrap();
        let digest = list["packages"]["echo"]["current"]["digest"]
            .as_str()
            .unwrap();
        let folder = state
            .join("store")
            .join(digest.trim_start_matches("sha256:"));
        assert!(folder.join("MANIFEST.json").is_file(), "{step}");
        assert!(folder.join("echo/quiver.yaml").is_file(), "{step}");
        assert!(
            env.listed().contains("\"echo\""),
            "{step}: {}",
            env.listed()
        );
        // The next install works, and so does going back for the next round.
        env.ok(&["install", "v2.qpkg", "--yes"]);
        assert!(env.ok(&["installed"]).contains("acme/echo\t1.1.0"));
        env.ok(&["rollback", "echo"]);
        assert!(env.ok(&["installed"]).contains("acme/echo\t1.0.0"));
    }
}
