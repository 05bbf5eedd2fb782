//! A package's `requirements.txt` installed at install time into its own Python environment
//! (`<state>/envs/<digest hex>/`), from a folder of wheels built in the test: pinned versions
//! only, nothing left behind when refused, a crash while it is built leaving the old state,
//! staging folders of dead installs swept.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use quiver_install::InstallError;
use quiver_install::store::{CommitOptions, Committed, Step, Store};
use quiver_package::distribution::python_env::COMPLETE;

use super::common::package;
use super::wheel::{build_wheel, can_make_envs};

/// The package `id` at `version` (the echo tool), with `requirements` as its
/// `requirements.txt`.
fn with_requirements(dir: &Path, id: &str, version: &str, requirements: &str) -> PathBuf {
    let root = package(dir, id, version, &[]);
    fs::write(root.join("requirements.txt"), requirements).unwrap();
    root
}

fn options(wheels: &Path) -> CommitOptions {
    CommitOptions {
        wheels: Some(wheels.to_owned()),
        ..Default::default()
    }
}

fn install(
    state: &Path,
    folder: &Path,
    options: &CommitOptions,
) -> Result<Committed, InstallError> {
    let store = Store::new(state);
    let staged = store.stage_folder(folder, None)?;
    store.commit(staged, options)
}

/// What `python` prints for `code`.
fn python(env: &Path, code: &str) -> String {
    let out = Command::new(env.join("bin/python"))
        .args(["-c", code])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// The entries of `<state>/<dir>`.
fn entries(state: &Path, dir: &str) -> Vec<String> {
    fs::read_dir(state.join(dir))
        .map(|r| {
            r.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// No environment, no store folder, no staging, nothing listed.
fn nothing_left(state: &Path) {
    assert!(Store::new(state).installed().unwrap().packages.is_empty());
    for dir in ["store", "staging", "envs"] {
        assert_eq!(
            entries(state, dir),
            Vec::<String>::new(),
            "{dir} is not empty"
        );
    }
}

#[test]
fn pinned_requirements_install_from_a_wheel_folder_into_the_packages_environment() {
    if !can_make_envs() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let wheels = tmp.path().join("wheels");
    let wheel = build_wheel(&wheels, "quiverdemo", "1.0.0", "VALUE = '天气'\n", &[]);
    let hash = quiver_package::digest::sha256_digest(&fs::read(&wheel).unwrap());
    let folder = with_requirements(
        tmp.path(),
        "dated",
        "1.0.0",
        &format!("# pinned, with its hash\nquiverdemo==1.0.0 \\\n    --hash={hash}\n"),
    );
    assert_eq!(
        install(&state, &folder, &options(&wheels)).unwrap(),
        Committed::New
    );

    let store = Store::new(&state);
    let record = store.installed().unwrap().packages["dated"].current.clone();
    let env = store.env_folder(&record.digest);
    assert!(env.join(COMPLETE).is_file());
    assert_eq!(
        python(&env, "import quiverdemo; print(quiverdemo.VALUE)"),
        "天气"
    );
    // The environment is outside the read-only store folder, and read-only itself.
    assert!(!env.starts_with(store.folder(&record.digest)));
    use std::os::unix::fs::PermissionsExt;
    let mode = fs::metadata(env.join("bin")).unwrap().permissions().mode();
    assert_eq!(mode & 0o222, 0, "the environment is writable");
    // The system's interpreter, which the link points to, keeps its mode.
    let target = fs::canonicalize(env.join("bin/python3")).unwrap();
    assert_ne!(
        fs::metadata(&target).unwrap().permissions().mode() & 0o200,
        0
    );

    // Installed again (after an uninstall that keeps the store), the environment is reused.
    let marker = fs::metadata(env.join(COMPLETE))
        .unwrap()
        .modified()
        .unwrap();
    store.uninstall("dated", false).unwrap();
    assert_eq!(
        install(&state, &folder, &options(&wheels)).unwrap(),
        Committed::New
    );
    assert_eq!(
        fs::metadata(env.join(COMPLETE))
            .unwrap()
            .modified()
            .unwrap(),
        marker
    );
    // Removed by hand, it is built again by installing the same package again.
    Command::new("chmod")
        .arg("-R")
        .arg("u+w")
        .arg(&env)
        .status()
        .unwrap();
    fs::remove_file(env.join(COMPLETE)).unwrap();
    assert_eq!(
        install(&state, &folder, &options(&wheels)).unwrap(),
        Committed::Unchanged
    );
    assert!(env.join(COMPLETE).is_file());

    // `uninstall --purge` removes it with the store folder.
    store.uninstall("dated", true).unwrap();
    nothing_left(&state);

    // A wrong hash is refused by pip, and nothing is left.
    let other = format!("sha256:{}", "0".repeat(64));
    let bad = with_requirements(
        &tmp.path().join("bad"),
        "dated",
        "1.0.0",
        &format!("quiverdemo==1.0.0 --hash={other}\n"),
    );
    let err = install(&state, &bad, &options(&wheels))
        .unwrap_err()
        .to_string();
    assert!(err.contains("quiverdemo"), "{err}");
    nothing_left(&state);
}

#[test]
fn a_package_without_requirements_gets_no_environment() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let folder = package(tmp.path(), "plain", "1.0.0", &[]);
    install(&state, &folder, &CommitOptions::default()).unwrap();
    assert_eq!(entries(&state, "envs"), Vec::<String>::new());
}

#[test]
fn requirements_that_are_not_exact_pins_are_refused_with_file_and_line() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    for (text, line, code) in [
        (
            "quiverdemo==1.0.0\nrequests>=2\n",
            2,
            "requirements-unpinned",
        ),
        (
            "--index-url https://evil.example/simple\n",
            1,
            "requirements-unsupported",
        ),
        (
            "# one\n\ngit+https://example.com/x.git@v1\n",
            3,
            "requirements-unsupported",
        ),
        ("-r more.txt\n", 1, "requirements-unsupported"),
    ] {
        let folder = with_requirements(
            &tmp.path().join(format!("p{line}{code}")),
            "dated",
            "1.0.0",
            text,
        );
        let Err(InstallError::Check(diags)) = install(&state, &folder, &CommitOptions::default())
        else {
            panic!("{text:?} was not refused");
        };
        let d = diags.iter().find(|d| d.is_error()).unwrap();
        assert_eq!((d.code, d.line), (code, Some(line)), "{text:?}");
        assert!(d.file.ends_with("requirements.txt"), "{}", d.file.display());
        nothing_left(&state);
    }
}

#[test]
fn a_missing_wheel_or_an_unpinned_dependency_is_refused_and_leaves_nothing() {
    if !can_make_envs() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let wheels = tmp.path().join("wheels");
    build_wheel(&wheels, "quiverdemo", "1.0.0", "VALUE = 1\n", &[]);
    build_wheel(
        &wheels,
        "quiverneeds",
        "1.0.0",
        "import quiverdemo\n",
        &["quiverdemo"],
    );

    let folder = with_requirements(tmp.path(), "dated", "1.0.0", "quiverabsent==2.0\n");
    let err = install(&state, &folder, &options(&wheels)).unwrap_err();
    assert!(matches!(err, InstallError::Environment(_)), "{err:?}");
    assert!(err.to_string().contains("quiverabsent==2.0"), "{err}");
    nothing_left(&state);

    // `--no-deps` installs only what is pinned; `pip check` refuses what is then missing.
    let folder = with_requirements(
        &tmp.path().join("n"),
        "dated",
        "1.0.0",
        "quiverneeds==1.0.0\n",
    );
    let err = install(&state, &folder, &options(&wheels))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("pip check") && err.contains("quiverdemo"),
        "{err}"
    );
    nothing_left(&state);
}

#[test]
fn a_crash_while_the_environment_is_built_leaves_the_old_state() {
    if !can_make_envs() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let wheels = tmp.path().join("wheels");
    build_wheel(&wheels, "quiverdemo", "1.0.0", "VALUE = 1\n", &[]);
    let v1 = with_requirements(
        &tmp.path().join("1"),
        "dated",
        "1.0.0",
        "quiverdemo==1.0.0\n",
    );
    let v2 = with_requirements(
        &tmp.path().join("2"),
        "dated",
        "1.1.0",
        "quiverdemo==1.0.0\n",
    );
    install(&state, &v1, &options(&wheels)).unwrap();
    let store = Store::new(&state);
    let old = store.installed().unwrap();
    let crash = CommitOptions {
        fail_at: Some(Step::Environment),
        ..options(&wheels)
    };
    assert!(install(&state, &v2, &crash).is_err());
    assert_eq!(store.installed().unwrap(), old);
    let stores = entries(&state, "store");
    assert_eq!(stores.len(), 1, "{stores:?}");
    // The new version's environment is there, unfinished; the next operation under the lock
    // removes it, and the next install builds it whole.
    assert_eq!(entries(&state, "envs").len(), 2);
    drop(store.lock_state().unwrap());
    assert_eq!(entries(&state, "envs").len(), 1);
    install(&state, &v2, &options(&wheels)).unwrap();
    let now = store.installed().unwrap().packages["dated"].current.clone();
    assert_eq!(now.version.to_string(), "1.1.0");
    assert!(store.env_folder(&now.digest).join(COMPLETE).is_file());
}

#[test]
fn staging_folders_of_dead_installs_are_swept_and_live_ones_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let store = Store::new(&state);
    // What a killed install leaves: a folder and its lock file, the lock no longer held; and
    // a folder of an older Quiver, without a lock file.
    let staging = state.join("staging");
    fs::create_dir_all(staging.join("dead/package")).unwrap();
    fs::write(staging.join("dead.lock"), "1\n").unwrap();
    fs::create_dir_all(staging.join("old/package")).unwrap();
    // A live one: staged in this process, not yet committed.
    let live = store
        .stage_folder(&package(tmp.path(), "echo", "1.0.0", &[]), None)
        .unwrap();
    assert_eq!(entries(&state, "staging").len(), 5);
    drop(store.lock_state().unwrap());
    let mut left = entries(&state, "staging");
    left.sort();
    assert_eq!(left.len(), 2, "{left:?}");
    assert!(
        left.iter()
            .all(|n| n != "dead" && n != "old" && n != "dead.lock"),
        "{left:?}"
    );
    // The live one still commits, and leaves nothing in staging.
    store.commit(live, &CommitOptions::default()).unwrap();
    assert_eq!(entries(&state, "staging"), Vec::<String>::new());
}
