//! Nothing outside a package folder is read through a link, nor anything under `/proc` or
//! `/dev`, and a refused file's content never appears in a diagnostic. Real links in real
//! folders.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;

use quiver_package::load_package;

const CANARY: &str = "CANARY-7f3a9c-outside";

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn link(root: &Path, rel: &str, target: &Path) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    symlink(target, path).unwrap();
}

const TOOL: &str = "description: t\ncategory: perception\nexpose: true\nrun: {command: [a]}\n";

/// A package `p` with one good tool, plus whatever `setup` adds.
fn package(setup: &dyn Fn(&Path, &Path)) -> (tempfile::TempDir, quiver_package::Loaded) {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().join("outside");
    fs::create_dir_all(&outside).unwrap();
    let secret = outside.join("secret");
    fs::write(&secret, format!("{CANARY}: x\n{CANARY}\n")).unwrap();
    fs::set_permissions(&secret, fs::Permissions::from_mode(0o600)).unwrap();
    let dir = tmp.path().join("p");
    write(&dir, "quiver.yaml", "id: p\n");
    write(&dir, "tools/ok/tool.yaml", TOOL);
    setup(&dir, &secret);
    let loaded = load_package(&dir);
    (tmp, loaded)
}

fn assert_no_canary(loaded: &quiver_package::Loaded) {
    for d in &loaded.diagnostics {
        let text = format!("{} {:?}", d.message, d.help);
        assert!(!text.contains(CANARY), "{d:?}");
    }
    let json = serde_json::to_string(&loaded.package.as_ref().map(|p| &p.prompts)).unwrap();
    assert!(!json.contains(CANARY));
}

#[test]
fn links_out_of_the_package_are_refused_unread() {
    type Setup = fn(&Path, &Path);
    let cases: &[(&str, Setup, &str)] = &[
        (
            "prompt -> a file outside",
            |d, s| link(d, "prompts/x.md", s),
            "file-outside-package",
        ),
        (
            "prompt -> /proc/self/environ",
            |d, _| link(d, "prompts/x.md", Path::new("/proc/self/environ")),
            "file-outside-package",
        ),
        (
            "tool.yaml -> a file outside",
            |d, s| link(d, "tools/bad/tool.yaml", s),
            "file-outside-package",
        ),
        (
            "tool.yaml -> /dev/zero",
            |d, _| link(d, "tools/bad/tool.yaml", Path::new("/dev/zero")),
            "file-outside-package",
        ),
        (
            "SKILL.md -> a 0600 file outside",
            |d, s| link(d, "skills/s/SKILL.md", s),
            "file-outside-package",
        ),
        (
            "a tool folder -> a folder outside",
            |d, s| {
                write(
                    s.parent().unwrap(),
                    "t/tool.yaml",
                    &format!("{CANARY}: 1\n"),
                );
                link(d, "tools/bad", &s.parent().unwrap().join("t"));
            },
            "file-outside-package",
        ),
        (
            "AGENTS.md -> a file outside",
            |d, s| link(d, "AGENTS.md", s),
            "file-outside-package",
        ),
        (
            "a FIFO as prompt",
            |d, _| {
                fs::create_dir_all(d.join("prompts")).unwrap();
                let made = std::process::Command::new("mkfifo")
                    .arg(d.join("prompts/x.md"))
                    .status()
                    .unwrap();
                assert!(made.success());
            },
            "file-not-regular",
        ),
    ];
    for (name, setup, code) in cases {
        let (_tmp, loaded) = package(setup);
        let codes: Vec<_> = loaded.diagnostics.iter().map(|d| d.code).collect();
        assert!(codes.contains(code), "{name}: {:?}", loaded.diagnostics);
        let refused: Vec<_> = loaded
            .diagnostics
            .iter()
            .filter(|d| d.code == *code)
            .collect();
        // No line: nothing is shown from the file (the CLI prints a snippet for a line).
        assert!(refused.iter().all(|d| d.line.is_none()), "{name}");
        assert_no_canary(&loaded);
        let p = loaded.package.expect(name);
        assert!(p.tool("ok").is_some(), "{name}");
        assert!(p.tool("bad").is_none() && p.skills.is_empty(), "{name}");
        assert!(p.prompts.is_empty() && p.agents_md.is_none(), "{name}");
    }
}

#[test]
fn links_inside_the_package_and_a_linked_package_folder_load() {
    let tmp = tempfile::tempdir().unwrap();
    let real = tmp.path().join("real");
    write(&real, "quiver.yaml", "id: p\n");
    write(&real, "docs/shared.md", "shared text\n");
    link(&real, "prompts/x.md", Path::new("../docs/shared.md"));
    write(&real, "tools/ok/tool.yaml", TOOL);
    let linked = tmp.path().join("linked");
    symlink(&real, &linked).unwrap();
    let loaded = load_package(&linked);
    assert!(loaded.diagnostics.is_empty(), "{:?}", loaded.diagnostics);
    let p = loaded.package.unwrap();
    assert_eq!(p.prompts[0].content, "shared text");
}

#[test]
fn a_skill_file_that_became_a_link_outside_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    write(
        &dir,
        "SKILL.md",
        "---\nname: p\ndescription: d\n---\nbody\n",
    );
    write(&dir, "references/a.md", "inside\n");
    let secret = tmp.path().join("secret");
    fs::write(&secret, CANARY).unwrap();
    let skill = load_package(&dir).package.unwrap().skill.unwrap();
    assert_eq!(skill.files, ["references/a.md"]);
    assert_eq!(
        skill.read_file("references/a.md", 1000).unwrap(),
        "inside\n"
    );
    assert_eq!(
        skill.read_file("references/b.md", 1000).unwrap_err().code,
        "file-unreadable"
    );
    fs::remove_file(dir.join("references/a.md")).unwrap();
    symlink(&secret, dir.join("references/a.md")).unwrap();
    let err = skill.read_file("references/a.md", 1000).unwrap_err();
    assert_eq!(err.code, "file-outside-package");
    assert!(!err.message.contains(CANARY));
}

#[test]
fn a_skill_body_comes_from_the_snapshot() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let text = |body: &str| format!("---\nname: p\ndescription: d\n---\n{body}\n");
    write(&dir, "SKILL.md", &text("old body"));
    let skill = load_package(&dir).package.unwrap().skill.unwrap();
    write(&dir, "SKILL.md", &text("new body"));
    assert_eq!(skill.body.trim(), "old body");
    let reloaded = load_package(&dir).package.unwrap().skill.unwrap();
    assert_eq!(reloaded.body.trim(), "new body");
}
