//! Hostile archives, one per rule of safe unpacking, each refused with its reason and nothing
//! written outside the destination.

use quiver_install::archive::unpack;
use quiver_package::distribution::paths::Limits;
use tar::EntryType;

use super::common::{Raw, gzip, key, manifest_of, meta, raw_archive, raw_tar};

fn refused(entries: Vec<Raw>, limits: Limits, want: &str) {
    refused_bytes(&raw_archive(&entries), limits, want);
}

fn refused_bytes(bytes: &[u8], limits: Limits, want: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let dest = tmp.path().join("dest");
    let err = unpack(bytes, Some(&dest), &limits).expect_err(want);
    assert!(
        err.to_string().contains(want),
        "`{err}` should say `{want}`"
    );
    // Nothing escaped the destination.
    let outside: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(outside.iter().all(|n| n == "dest"), "{outside:?}");
}

#[test]
fn each_rule_refuses_its_hostile_archive() {
    let k = key(1);
    let ok = manifest_of(&[("SKILL.md", b"hi")]);
    let with = |extra: Vec<Raw>| {
        let mut entries: Vec<Raw> = meta(&ok, &k).into();
        entries.push(Raw::file("SKILL.md", b"hi"));
        entries.extend(extra);
        entries
    };
    let d = Limits::default();
    let cases: Vec<(&str, Vec<Raw>, &str)> = vec![
        (
            "symlink",
            with(vec![Raw::kind("evil", EntryType::Symlink)]),
            "symbolic link",
        ),
        (
            "hard link",
            with(vec![Raw::kind("evil", EntryType::Link)]),
            "hard link",
        ),
        (
            "char device",
            with(vec![Raw::kind("evil", EntryType::Char)]),
            "device",
        ),
        (
            "block device",
            with(vec![Raw::kind("evil", EntryType::Block)]),
            "device",
        ),
        (
            "fifo",
            with(vec![Raw::kind("evil", EntryType::Fifo)]),
            "FIFO",
        ),
        (
            "folder",
            with(vec![Raw::kind("dir/", EntryType::Directory)]),
            "folder entry",
        ),
        (
            "pax",
            with(vec![Raw::kind("PaxHeaders/x", EntryType::XHeader)]),
            "PAX",
        ),
        (
            "pax global",
            with(vec![Raw::kind(
                "pax_global_header",
                EntryType::XGlobalHeader,
            )]),
            "PAX",
        ),
        (
            "gnu long name",
            with(vec![Raw::kind("././@LongLink", EntryType::GNULongName)]),
            "GNU long-name",
        ),
        (
            "absolute",
            with(vec![Raw::file("/tmp/evil", b"x")]),
            "absolute",
        ),
        ("dot dot", with(vec![Raw::file("../evil", b"x")]), "`..`"),
        (
            "backslash",
            with(vec![Raw::file("a\\..\\evil", b"x")]),
            "backslash",
        ),
        (
            "empty segment",
            with(vec![Raw::file("a//evil", b"x")]),
            "empty segment",
        ),
        (
            "reserved",
            with(vec![Raw::file(".quiver/extra", b"x")]),
            "reserved",
        ),
        (
            "not listed",
            with(vec![Raw::file("extra.md", b"x")]),
            "not in the manifest",
        ),
        (
            "twice",
            with(vec![Raw::file("SKILL.md", b"hi")]),
            "listed twice",
        ),
    ];
    for (name, entries, want) in cases {
        eprintln!("case {name}");
        refused(entries, d, want);
    }
}

#[test]
fn paths_equal_after_folding_are_refused() {
    let k = key(1);
    let m = manifest_of(&[("README.md", b"a"), ("readme.md", b"a")]);
    let mut entries: Vec<Raw> = meta(&m, &k).into();
    entries.push(Raw::file("README.md", b"a"));
    entries.push(Raw::file("readme.md", b"a"));
    refused(entries, Limits::default(), "case folding");
    // Also when only the archive has the second spelling (NFC, then NFD).
    let m = manifest_of(&[("caf\u{e9}.md", b"a")]);
    let mut entries: Vec<Raw> = meta(&m, &k).into();
    entries.push(Raw::file("caf\u{e9}.md", b"a"));
    entries.push(Raw::file("cafe\u{301}.md", b"a"));
    refused(entries, Limits::default(), "case folding");
}

#[test]
fn the_limits_are_enforced() {
    let k = key(1);
    let files: Vec<(String, Vec<u8>)> = (0..3)
        .map(|i| (format!("f{i}.md"), vec![b'x'; 10]))
        .collect();
    let listed: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(p, d)| (p.as_str(), d.as_slice()))
        .collect();
    let m = manifest_of(&listed);
    let entries = || {
        let mut e: Vec<Raw> = meta(&m, &k).into();
        e.extend(files.iter().map(|(p, d)| Raw::file(p, d)));
        e
    };
    let d = Limits::default();
    refused(
        entries(),
        Limits { max_files: 2, ..d },
        "at most 2 are accepted",
    );
    refused(
        entries(),
        Limits {
            max_file_bytes: 9,
            ..d
        },
        "at most 9 a file",
    );
    refused(
        entries(),
        Limits {
            max_total_bytes: 25,
            ..d
        },
        "at most 25 are accepted",
    );
    let deep = manifest_of(&[("a/b/c/d.md", b"x")]);
    let mut e: Vec<Raw> = meta(&deep, &k).into();
    e.push(Raw::file("a/b/c/d.md", b"x"));
    refused(e, Limits { max_depth: 3, ..d }, "too deep");
}

#[test]
fn the_archive_must_match_its_manifest_exactly() {
    let k = key(1);
    let m = manifest_of(&[("SKILL.md", b"hi"), ("notes.md", b"n")]);
    // A file removed.
    let mut e: Vec<Raw> = meta(&m, &k).into();
    e.push(Raw::file("SKILL.md", b"hi"));
    refused(
        e,
        Limits::default(),
        "in the manifest but not in the archive",
    );
    // One byte changed.
    let mut e: Vec<Raw> = meta(&m, &k).into();
    e.push(Raw::file("SKILL.md", b"ho"));
    e.push(Raw::file("notes.md", b"n"));
    refused(e, Limits::default(), "does not match its digest");
    // A size that differs.
    let mut e: Vec<Raw> = meta(&m, &k).into();
    e.push(Raw::file("SKILL.md", b"hi!"));
    refused(e, Limits::default(), "the manifest says 2");
    // A mode changed to setuid.
    let mut e: Vec<Raw> = meta(&m, &k).into();
    let mut f = Raw::file("SKILL.md", b"hi");
    f.mode = 0o4644;
    e.push(f);
    refused(e, Limits::default(), "mode");
    // The manifest not first.
    let [manifest, signature] = meta(&m, &k);
    refused(
        vec![Raw::file("SKILL.md", b"hi"), manifest, signature],
        Limits::default(),
        "must come before",
    );
}

#[test]
fn data_after_the_last_entry_or_a_broken_gzip_trailer_is_refused() {
    let k = key(1);
    let m = manifest_of(&[("SKILL.md", b"hi")]);
    let mut entries: Vec<Raw> = meta(&m, &k).into();
    entries.push(Raw::file("SKILL.md", b"hi"));
    let mut tar = raw_tar(&entries);
    tar.extend_from_slice(b"smuggled");
    refused_bytes(&gzip(&tar), Limits::default(), "data follows");
    let mut gz = raw_archive(&entries);
    let n = gz.len();
    gz[n - 6] ^= 0xff; // the gzip trailer's CRC
    refused_bytes(&gz, Limits::default(), "damaged");
}

#[test]
fn a_refused_signature_stops_the_unpacking_before_any_file_is_written() {
    let k = key(1);
    let m = manifest_of(&[("SKILL.md", b"hi")]);
    let mut entries: Vec<Raw> = meta(&m, &k).into();
    entries.push(Raw::file("SKILL.md", b"hi"));
    let tmp = tempfile::tempdir().unwrap();
    let dest = tmp.path().join("dest");
    let bytes = raw_archive(&entries);
    let result = quiver_install::archive::unpack_checked(
        bytes.as_slice(),
        Some(&dest),
        &Limits::default(),
        |_, _| Err::<(), _>(quiver_install::InstallError::Refused("untrusted".into())),
    );
    assert!(result.is_err());
    assert!(
        !dest.exists(),
        "files were written before the signature was checked"
    );
}
