//! The package index: built, resolved, and each attack on it refused (stale, rolled back,
//! mixed and matched, an archive swapped, confusable ids).

use std::fs;
use std::path::Path;

use quiver_install::index::{build, resolve, stage};
use quiver_install::store::Store;
use quiver_install::trust::TrustStore;
use quiver_package::distribution::index::INDEX_SCOPE;

use super::common::{key, pack_to, package};

/// An index folder with acme/echo 1.0.0 and 1.1.0; a trust store for acme and the index key.
fn index(tmp: &Path) -> (std::path::PathBuf, TrustStore) {
    let dir = tmp.join("index");
    fs::create_dir_all(dir.join("packages")).unwrap();
    let k = key(1);
    pack_to(
        &package(&tmp.join("a"), "echo", "1.0.0", &[]),
        Some(&k),
        &dir.join("packages/echo-1.0.0.qpkg"),
    );
    pack_to(
        &package(&tmp.join("b"), "echo", "1.1.0", &[]),
        Some(&k),
        &dir.join("packages/echo-1.1.0.qpkg"),
    );
    let state = tmp.join("state");
    let mut trust = TrustStore::load(&state).unwrap();
    trust.add("acme", &k.verifying_key(), vec![]).unwrap();
    trust
        .add("index", &key(9).verifying_key(), vec![INDEX_SCOPE.into()])
        .unwrap();
    (dir, trust)
}

fn refused(result: Result<impl std::fmt::Debug, quiver_install::InstallError>, want: &str) {
    let err = result.unwrap_err().to_string();
    assert!(err.contains(want), "`{err}` should say `{want}`");
}

#[test]
fn a_built_index_resolves_and_installs_the_version_asked_for() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, trust) = index(tmp.path());
    let built = build(&dir, &key(9), 3600).unwrap();
    assert_eq!((built.snapshot.sequence, built.versions), (1, 2));
    let state = tmp.path().join("state");
    let latest = resolve(&dir, "acme/echo", &trust, &state).unwrap();
    assert_eq!(latest.line.version.to_string(), "1.1.0");
    let one = resolve(&dir, "acme/echo@1.0.0", &trust, &state).unwrap();
    let store = Store::new(&state);
    let staged = stage(&store, &one, &trust).unwrap();
    assert_eq!(staged.record.version.to_string(), "1.0.0");
    refused(
        resolve(&dir, "acme/echo@2.0.0", &trust, &state),
        "not in the index",
    );
    // Signed by a key not trusted for indexes.
    let mut untrusting = trust.clone();
    untrusting.keys.retain(|k| k.publisher != "index");
    refused(
        resolve(&dir, "acme/echo", &untrusting, &state),
        "not signed by a key trusted for indexes",
    );
}

#[test]
fn a_stale_a_rolled_back_and_a_mixed_index_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, trust) = index(tmp.path());
    let state = tmp.path().join("state");
    // Stale: expired at once.
    build(&dir, &key(9), 0).unwrap();
    refused(resolve(&dir, "acme/echo", &trust, &state), "expired");
    // Rolled back: sequence 3 seen, then the older snapshot of sequence 2 served again.
    build(&dir, &key(9), 3600).unwrap();
    let old = fs::read(dir.join("snapshot.json")).unwrap();
    build(&dir, &key(9), 3600).unwrap();
    resolve(&dir, "acme/echo", &trust, &state).unwrap();
    fs::write(dir.join("snapshot.json"), &old).unwrap();
    refused(resolve(&dir, "acme/echo", &trust, &state), "lower than 3");
    // Mixed and matched: an index file that is not the one the snapshot names.
    build(&dir, &key(9), 3600).unwrap();
    let file = dir.join("index/acme/echo.json");
    let text = fs::read_to_string(&file).unwrap();
    let first_line_only: String = text.lines().next().unwrap().to_owned() + "\n";
    fs::write(&file, first_line_only).unwrap();
    refused(
        resolve(&dir, "acme/echo", &trust, &state),
        "mixed-and-matched",
    );
    // An archive swapped for another version's: its digest is not the line's.
    build(&dir, &key(9), 3600).unwrap();
    fs::copy(
        dir.join("packages/echo-1.1.0.qpkg"),
        dir.join("packages/echo-1.0.0.qpkg"),
    )
    .unwrap();
    let resolved = resolve(&dir, "acme/echo@1.0.0", &trust, &state).unwrap();
    refused(
        stage(&Store::new(&state), &resolved, &trust),
        "mixed-and-matched",
    );
}

#[test]
fn confusable_ids_of_another_publisher_are_refused_at_build() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _) = index(tmp.path());
    let evil = package(&tmp.path().join("e"), "ech0", "1.0.0", &[]);
    let packed = quiver_install::pack::pack_dir(
        &evil,
        &quiver_install::pack::PackOptions {
            publisher: "evil".into(),
            version: None,
            signer: Some(key(5)),
        },
    )
    .unwrap();
    fs::write(dir.join("packages/ech0.qpkg"), packed.bytes).unwrap();
    refused(build(&dir, &key(9), 3600), "looks like");
}
