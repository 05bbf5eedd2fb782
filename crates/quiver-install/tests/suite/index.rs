//! The package index: built, resolved, and each attack on it refused (stale, rolled back,
//! mixed and matched, an archive swapped, confusable ids).

use std::fs;
use std::path::Path;

use quiver_install::index::{IndexLocation, build, resolve, stage};
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

fn folder(dir: &Path) -> IndexLocation {
    IndexLocation::Folder(dir.to_owned())
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
    let latest = resolve(&folder(&dir), "acme/echo", &trust, &state, tmp.path()).unwrap();
    assert_eq!(latest.line.version.to_string(), "1.1.0");
    let one = resolve(&folder(&dir), "acme/echo@1.0.0", &trust, &state, tmp.path()).unwrap();
    let store = Store::new(&state);
    let staged = stage(&store, &one, &trust).unwrap();
    assert_eq!(staged.record.version.to_string(), "1.0.0");
    refused(
        resolve(&folder(&dir), "acme/echo@2.0.0", &trust, &state, tmp.path()),
        "not in the index",
    );
    // Signed by a key not trusted for indexes.
    let mut untrusting = trust.clone();
    untrusting.keys.retain(|k| k.publisher != "index");
    refused(
        resolve(&folder(&dir), "acme/echo", &untrusting, &state, tmp.path()),
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
    refused(
        resolve(&folder(&dir), "acme/echo", &trust, &state, tmp.path()),
        "expired",
    );
    // Rolled back: sequence 3 seen, then the older snapshot of sequence 2 served again.
    build(&dir, &key(9), 3600).unwrap();
    let old = fs::read(dir.join("snapshot.json")).unwrap();
    build(&dir, &key(9), 3600).unwrap();
    resolve(&folder(&dir), "acme/echo", &trust, &state, tmp.path()).unwrap();
    fs::write(dir.join("snapshot.json"), &old).unwrap();
    refused(
        resolve(&folder(&dir), "acme/echo", &trust, &state, tmp.path()),
        "lower than 3",
    );
    // Mixed and matched: an index file that is not the one the snapshot names.
    build(&dir, &key(9), 3600).unwrap();
    let file = dir.join("index/acme/echo.json");
    let text = fs::read_to_string(&file).unwrap();
    let first_line_only: String = text.lines().next().unwrap().to_owned() + "\n";
    fs::write(&file, first_line_only).unwrap();
    refused(
        resolve(&folder(&dir), "acme/echo", &trust, &state, tmp.path()),
        "mixed-and-matched",
    );
    // An archive swapped for another version's: its digest is not the line's.
    build(&dir, &key(9), 3600).unwrap();
    fs::copy(
        dir.join("packages/echo-1.1.0.qpkg"),
        dir.join("packages/echo-1.0.0.qpkg"),
    )
    .unwrap();
    let resolved = resolve(&folder(&dir), "acme/echo@1.0.0", &trust, &state, tmp.path()).unwrap();
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

/// Serves the files of `dir` over HTTP on loopback, one request at a time, until the test ends.
fn serve(dir: std::path::PathBuf) -> String {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request = String::new();
            reader.read_line(&mut request).unwrap();
            let mut header = String::new();
            while reader.read_line(&mut header).unwrap() > 2 {
                header.clear();
            }
            let path = request
                .split(' ')
                .nth(1)
                .unwrap_or("/")
                .trim_start_matches('/');
            let mut stream = stream;
            match fs::read(dir.join(path)) {
                Ok(body) => {
                    write!(
                        stream,
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    )
                    .unwrap();
                    stream.write_all(&body).unwrap();
                }
                Err(_) => write!(
                    stream,
                    "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                )
                .unwrap(),
            }
        }
    });
    format!("http://{addr}")
}

#[test]
fn an_index_is_read_over_http_as_from_a_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, trust) = index(tmp.path());
    build(&dir, &key(9), 3600).unwrap();
    let site = IndexLocation::parse(&serve(dir.clone()));
    let state = tmp.path().join("state");
    let scratch = tempfile::tempdir().unwrap();
    let resolved = resolve(&site, "acme/echo@1.0.0", &trust, &state, scratch.path()).unwrap();
    let staged = stage(&Store::new(&state), &resolved, &trust).unwrap();
    assert_eq!(staged.record.version.to_string(), "1.0.0");
    refused(
        resolve(&site, "acme/nothing", &trust, &state, scratch.path()),
        "not in the index",
    );
}
