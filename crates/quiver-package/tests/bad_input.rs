//! Hostile and broken packages: each problem is a diagnostic with file and line, nothing
//! panics, and the rest of the package still loads.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::Path;

use quiver_package::load_package;

fn write(root: &Path, rel: &str, bytes: &[u8]) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, bytes).unwrap();
}

const GOOD_TOOL: &str =
    "description: ok\ncategory: decision\nexpose: true\nrun: {command: [python3, main.py]}\n";

#[test]
fn broken_items_are_reported_and_the_rest_loads() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("pkg");
    write(
        &root,
        "quiver.yaml",
        b"id: pkg\nversion: 1.0.0\ndescription: test\n",
    );
    write(&root, "tools/good/tool.yaml", GOOD_TOOL.as_bytes());
    let deep = format!(
        "description: x\nexamples: {}{}\n",
        "[".repeat(3000),
        "]".repeat(3000)
    );
    let cases: &[(&str, &[u8], &str, Option<u32>)] = &[
        (
            "tools/yaml/tool.yaml",
            b"description: [unclosed\n",
            "yaml-syntax",
            Some(1),
        ),
        (
            "tools/types/tool.yaml",
            b"description: ok\ncategory: decision\ntimeout: [1]\nrun: {command: [a]}\n",
            "yaml-wrong-type",
            Some(3),
        ),
        (
            "tools/latin1/tool.yaml",
            b"description: caf\xe9\n",
            "file-not-utf8",
            Some(1),
        ),
        (
            "tools/deep/tool.yaml",
            deep.as_bytes(),
            "yaml-too-complex",
            None,
        ),
        (
            "skills/nofm/SKILL.md",
            b"# just markdown\n",
            "skill-missing-frontmatter",
            Some(1),
        ),
        (
            "skills/unclosed/SKILL.md",
            b"---\nname: unclosed\ndescription: d\n",
            "skill-unclosed-frontmatter",
            Some(1),
        ),
        (
            "skills/noname/SKILL.md",
            b"---\ndescription: d\n---\n",
            "skill-missing-field",
            None,
        ),
        (
            "agents/bad.md",
            b"---\nmax_turns: lots\n---\nprompt\n",
            "yaml-wrong-type",
            Some(2),
        ),
        (
            "prompts/bad.md",
            b"---\nretention: forever\n---\ntext\n",
            "yaml-wrong-type",
            Some(2),
        ),
        (
            "workflows/bad.yaml",
            b"description: d\nsteps: [{tool: missing}]\n",
            "workflow-unknown-target",
            Some(2),
        ),
    ];
    for (rel, bytes, _, _) in cases {
        write(&root, rel, bytes);
    }
    write(&root, "tools/big/tool.yaml", &vec![b'#'; 1024 * 1024 + 1]);
    #[cfg(unix)]
    std::os::unix::fs::symlink(&root, root.join("skills/loop")).unwrap();

    let loaded = load_package(&root);
    let package = loaded.package.expect("the package loads");
    assert_eq!(
        package
            .tools
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>(),
        ["good"]
    );
    for (rel, _, code, line) in cases {
        let diag = loaded
            .diagnostics
            .iter()
            .find(|d| d.file.ends_with(rel))
            .unwrap_or_else(|| panic!("no diagnostic for {rel}: {:#?}", loaded.diagnostics));
        assert_eq!(diag.code, *code, "{rel}: {diag:?}");
        if line.is_some() {
            assert_eq!(diag.line, *line, "{rel}: {diag:?}");
        }
    }
    assert!(
        loaded
            .diagnostics
            .iter()
            .any(|d| d.code == "file-too-large")
    );
}

#[test]
fn a_broken_manifest_stops_only_its_package() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "bad/quiver.yaml", b"id: Not Valid\n");
    let loaded = load_package(&tmp.path().join("bad"));
    assert!(loaded.package.is_none());
    assert_eq!(loaded.diagnostics[0].code, "manifest-invalid-id");
    assert_eq!(loaded.diagnostics[0].line, Some(1));
}

#[test]
fn tool_permissions_must_fit_the_package_ceiling() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("p");
    write(
        &root,
        "quiver.yaml",
        b"id: p\npermissions: {network: [api.example.com]}\n",
    );
    write(
        &root,
        "tools/ok/tool.yaml",
        format!("{GOOD_TOOL}permission: {{network: [api.example.com]}}\n").as_bytes(),
    );
    write(
        &root,
        "tools/greedy/tool.yaml",
        format!("{GOOD_TOOL}permission: {{network: [evil.example.net], shell: true}}\n").as_bytes(),
    );
    let loaded = load_package(&root);
    let package = loaded.package.unwrap();
    assert_eq!(
        package
            .tools
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>(),
        ["ok"]
    );
    let d = loaded
        .diagnostics
        .iter()
        .find(|d| d.code == "tool-permission-exceeds-package")
        .unwrap();
    assert!(
        d.message.contains("evil.example.net") && d.message.contains("shell"),
        "{d:?}"
    );
}

#[test]
fn items_share_one_namespace() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("p");
    write(&root, "quiver.yaml", b"id: p\n");
    write(&root, "tools/report/tool.yaml", GOOD_TOOL.as_bytes());
    write(
        &root,
        "agents/report.md",
        b"---\ndescription: d\n---\nprompt\n",
    );
    let loaded = load_package(&root);
    let d = loaded
        .diagnostics
        .iter()
        .find(|d| d.code == "item-duplicate-name")
        .unwrap();
    assert!(
        d.file.ends_with("agents/report.md") && d.message.contains("tool.yaml"),
        "{d:?}"
    );
}

#[test]
fn unicode_skill_names_get_a_stable_ascii_id() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("天气");
    write(
        &root,
        "SKILL.md",
        "---\nname: 天气\ndescription: 查询天气\n---\n正文\n".as_bytes(),
    );
    let a = load_package(&root).package.unwrap();
    let b = load_package(&root).package.unwrap();
    assert_eq!(a.id, b.id);
    assert!(a.id.as_str().starts_with("pkg-"), "{}", a.id);
    assert_eq!(a.name, "天气");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
    /// Arbitrary text through the splitter and every YAML-to-model step never panics.
    #[test]
    fn arbitrary_files_never_panic(text in "(---|\n|\r|:|-|\\[|\\{|\\]|\\}|&a|\\*a|!!|'|\"| |name|description|[a-z]{1,6}|天){0,60}") {
        let path = Path::new("x");
        let _ = quiver_package::skill::parse_skill(&text, path, Some("x"));
        let _ = quiver_package::tool::parse_tool(&text, path, "x", quiver_package::tool::ToolScope::Package);
        let _ = quiver_package::manifest::parse_manifest(&text, path);
        let _ = quiver_package::agent::parse_agent_file(&text, path);
        let _ = quiver_package::prompt::parse_prompt(&text, path, "x".parse().unwrap());
        let _ = quiver_package::workflow::parse_workflow(&text, path, "x".parse().unwrap(), &Default::default());
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]
    /// Arbitrary conditions and templates never panic, and an error's position is inside the
    /// text (or at its end).
    #[test]
    fn arbitrary_expressions_never_panic(text in "(\\{\\{|\\}\\}|\\(|\\)|!|&&|\\|\\||==|!=|<=|>=|<|>|\\.|\\[|\\]|'|\"|\\\\|-|[0-9]{1,3}|e|true|null|[a-z]{1,4}| |é|🙂){0,40}") {
        use quiver_package::workflow::{expr, template};
        if let Err(e) = expr::parse(&text) {
            proptest::prop_assert!(e.position <= text.len(), "{text:?}: {e}");
        }
        if let Err(e) = template::parse(&text) {
            proptest::prop_assert!(e.position <= text.len(), "{text:?}: {e}");
        }
    }
}
