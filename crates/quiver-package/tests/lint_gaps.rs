//! Problems the loader used to let through (issue 12, D23 and D24), each in a real folder.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::Path;

use quiver_package::{Loaded, load_package};

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

const RUN: &str = "run: {command: [python3, main.py]}\n";

fn tool(extra: &str) -> String {
    let run = if extra.contains("run:") { "" } else { RUN };
    format!("description: t\ncategory: perception\nexpose: true\n{run}{extra}")
}

/// Loads a package `p` made of `files` (a `quiver.yaml` is added unless given) and a good tool.
fn load(files: &[(&str, &str)]) -> (tempfile::TempDir, Loaded) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    if !files.iter().any(|(rel, _)| *rel == "quiver.yaml") {
        write(
            &dir,
            "quiver.yaml",
            "id: p\npermissions: {filesystem: {read: [/srv]}}\n",
        );
    }
    write(&dir, "tools/ok/tool.yaml", &tool(""));
    write(&dir, "tools/ok/main.py", "print(1)\n");
    for (rel, text) in files {
        write(&dir, rel, text);
    }
    let loaded = load_package(&dir);
    (tmp, loaded)
}

fn codes(loaded: &Loaded) -> Vec<&'static str> {
    loaded.diagnostics.iter().map(|d| d.code).collect()
}

#[test]
fn each_gap_is_a_diagnostic() {
    let agent = [
        ("agents/a/agent.yaml", "description: d\n".to_owned()),
        ("agents/a/system.md", "You work.\n".to_owned()),
    ];
    type Check = fn(&Loaded) -> bool;
    let no_t: Check = |l| l.package.as_ref().unwrap().tool("t").is_none();
    type Case = (
        &'static str,
        Vec<(&'static str, String)>,
        &'static [&'static str],
        Check,
    );
    let cases: &[Case] = &[
        (
            "unknown scope on a tool",
            vec![("tools/t/tool.yaml", tool("scopes: [grop]\n"))],
            &["unknown-scope"],
            no_t,
        ),
        (
            "known scopes",
            vec![(
                "tools/t/tool.yaml",
                tool("scopes: [group, private, channel]\n"),
            )],
            &[],
            |l| l.package.as_ref().unwrap().tool("t").is_some(),
        ),
        (
            "unknown scope on a skill",
            vec![(
                "SKILL.md",
                "---\nname: p\ndescription: d\nscopes: grop\n---\n".to_owned(),
            )],
            &["unknown-scope"],
            |l| l.package.as_ref().unwrap().skill.is_none(),
        ),
        (
            "unknown scope on a prompt section",
            vec![(
                "prompts/x.md",
                "---\nscopes: [group, grop]\n---\ntext\n".to_owned(),
            )],
            &["unknown-scope"],
            |l| l.package.as_ref().unwrap().prompts.is_empty(),
        ),
        (
            "a folder agent without boundaries.md and conventions.md",
            agent.to_vec(),
            &["agent-missing-file", "agent-missing-file"],
            |l| l.package.as_ref().unwrap().agents.len() == 1,
        ),
        (
            "SKILL.md `version`",
            vec![(
                "SKILL.md",
                "---\nname: p\ndescription: d\nversion: 1.0.0\n---\n".to_owned(),
            )],
            &[],
            |l| l.package.as_ref().unwrap().skill.is_some(),
        ),
        (
            "timeout: 0",
            vec![("tools/t/tool.yaml", tool("timeout: 0\n"))],
            &["tool-invalid-timeout"],
            no_t,
        ),
        (
            "an entry point up and out of the package",
            vec![(
                "tools/t/tool.yaml",
                tool("run: {command: [python3, ../../../x.py]}\n"),
            )],
            &["tool-entry-outside-package"],
            no_t,
        ),
        (
            "an absolute script outside the package",
            vec![(
                "tools/t/tool.yaml",
                tool("run: {worker: [bash, /tmp/x.sh]}\n"),
            )],
            &["tool-entry-outside-package"],
            no_t,
        ),
        (
            "programs from the PATH and by absolute path, scripts inside",
            vec![
                (
                    "tools/t/tool.yaml",
                    tool(
                        "run: {command: [/usr/bin/env, python3, -u, main.py, ../../lib/lib.py]}\n",
                    ),
                ),
                ("tools/t/main.py", "print(1)\n".to_owned()),
                ("lib/lib.py", "x = 1\n".to_owned()),
            ],
            &[],
            |l| l.package.as_ref().unwrap().tool("t").is_some(),
        ),
        (
            "a bidi override in a tool description",
            vec![(
                "tools/t/tool.yaml",
                tool("").replace("description: t", "description: \"evil \u{202E}txt.exe\""),
            )],
            &["text-hidden-characters"],
            no_t,
        ),
        (
            "a terminal escape in a trigger",
            vec![("tools/t/tool.yaml", tool("triggers: [\"\\e[2Jcls\"]\n"))],
            &["text-hidden-characters"],
            no_t,
        ),
        (
            "a zero-width space in a skill description",
            vec![(
                "SKILL.md",
                "---\nname: p\ndescription: \"do\u{200B}es\"\n---\n".to_owned(),
            )],
            &["text-hidden-characters"],
            |l| l.package.as_ref().unwrap().skill.is_none(),
        ),
        (
            "an escape in the manifest description stops the package",
            vec![(
                "quiver.yaml",
                "id: p\ndescription: \"\\e]0;owned\\a\"\n".to_owned(),
            )],
            &["text-hidden-characters"],
            |l| l.package.is_none(),
        ),
        (
            "seed 001's `filesystem: []` list",
            vec![(
                "quiver.yaml",
                "id: p\npermissions: {filesystem: [/srv/data]}\n".to_owned(),
            )],
            &["permission-filesystem-list"],
            |l| {
                l.package
                    .as_ref()
                    .unwrap()
                    .manifest
                    .permissions
                    .filesystem
                    .read
                    == ["/srv/data"]
            },
        ),
        (
            "an empty `filesystem: []` on a tool",
            vec![("tools/t/tool.yaml", tool("permission: {filesystem: []}\n"))],
            &["permission-filesystem-list"],
            |l| l.package.as_ref().unwrap().tool("t").is_some(),
        ),
        (
            "`~user/` cannot be expanded",
            vec![(
                "quiver.yaml",
                "id: p\npermissions: {filesystem: {read: [~bob/x]}}\n".to_owned(),
            )],
            &["permission-path-invalid"],
            |l| l.package.is_none(),
        ),
    ];
    for (name, files, want, check) in cases {
        let files: Vec<(&str, &str)> = files.iter().map(|(r, t)| (*r, t.as_str())).collect();
        let (_tmp, loaded) = load(&files);
        assert_eq!(codes(&loaded), *want, "{name}: {:?}", loaded.diagnostics);
        assert!(check(&loaded), "{name}: {:?}", loaded.diagnostics);
    }
}

#[test]
fn home_paths_are_expanded_at_load() {
    let home = std::env::var("HOME").unwrap();
    let (_tmp, loaded) = load(&[
        (
            "quiver.yaml",
            "id: p\npermissions: {filesystem: {read: [~/notes], write: [\"~\"]}}\n",
        ),
        (
            "tools/t/tool.yaml",
            &tool("permission: {filesystem: {read: [~/notes/today]}}\n"),
        ),
    ]);
    assert!(loaded.diagnostics.is_empty(), "{:?}", loaded.diagnostics);
    let p = loaded.package.unwrap();
    let ceiling = &p.manifest.permissions.filesystem;
    assert_eq!(ceiling.read, [format!("{home}/notes")]);
    assert_eq!(ceiling.write, [home.trim_end_matches('/').to_owned()]);
    assert_eq!(
        p.tool("t").unwrap().permission.filesystem.read,
        [format!("{home}/notes/today")]
    );
}

#[test]
fn a_description_block_of_parts_is_split() {
    let (_tmp, loaded) = load(&[(
        "tools/t/tool.yaml",
        &format!(
            "description: |\n  summary: 查询天气。\n  when_to_use: 用户问天气时\n    或者问气温时\n  when_not_to_use: 出行建议用 travel\ncategory: perception\n{RUN}"
        ),
    )]);
    assert!(loaded.diagnostics.is_empty(), "{:?}", loaded.diagnostics);
    let p = loaded.package.unwrap();
    let d = &p.tool("t").unwrap().description;
    assert_eq!(d.summary, "查询天气。");
    assert_eq!(d.when_to_use, "用户问天气时\n或者问气温时");
    assert_eq!(d.when_not_to_use, "出行建议用 travel");
    assert_eq!(d.summary_line(), "查询天气。");
    // A block that does not start with a part stays one summary.
    let (_tmp, loaded) = load(&[(
        "tools/t/tool.yaml",
        &format!(
            "description: |\n  Get the weather.\n  summary: not a part here\ncategory: perception\n{RUN}"
        ),
    )]);
    let p = loaded.package.unwrap();
    let d = &p.tool("t").unwrap().description;
    assert_eq!(d.summary, "Get the weather.\nsummary: not a part here\n");
    assert!(d.when_to_use.is_empty());
}

#[test]
fn yaml_1_1_booleans_stay_strings_in_every_file_kind() {
    let schema = "input:\n  type: object\n  properties:\n    n: {type: string, enum: [y, on, n, off]}\n  required: [n]\n";
    let (_tmp, loaded) = load(&[
        ("quiver.yaml", "id: p\nname: no\ndescription: on\n"),
        (
            "tools/t/tool.yaml",
            &tool(&format!("{schema}triggers: [y, n]\n")),
        ),
        (
            "SKILL.md",
            "---\nname: p\ndescription: yes\nwhen_to_use: off\n---\n",
        ),
        ("prompts/x.md", "---\ntitle: y\n---\ntext\n"),
        ("agents/a.md", "---\ndescription: n\n---\nYou help.\n"),
        (
            "workflows/w.yaml",
            "description: on\nsteps: [{tool: t, with: {n: y}}]\n",
        ),
    ]);
    assert!(loaded.diagnostics.is_empty(), "{:?}", loaded.diagnostics);
    let p = loaded.package.unwrap();
    assert_eq!((p.name.as_str(), p.description.as_str()), ("no", "on"));
    let t = p.tool("t").unwrap();
    assert_eq!(t.input["required"], serde_json::json!(["n"]));
    assert_eq!(
        t.input["properties"]["n"]["enum"],
        serde_json::json!(["y", "on", "n", "off"])
    );
    assert_eq!(t.triggers, ["y", "n"]);
    let skill = p.skill.unwrap();
    assert_eq!(
        (
            skill.description.as_str(),
            skill.meta.when_to_use.as_deref()
        ),
        ("yes", Some("off"))
    );
    assert_eq!(p.prompts[0].title.as_deref(), Some("y"));
    assert_eq!(p.agents[0].description, "n");
    assert_eq!(p.workflows[0].description, "on");
    // A boolean field written the YAML 1.1 way is a type error, not `true`.
    let (_tmp, loaded) = load(&[(
        "tools/t/tool.yaml",
        &tool("expose: yes\n").replace("expose: true\n", ""),
    )]);
    assert_eq!(
        codes(&loaded),
        ["yaml-wrong-type"],
        "{:?}",
        loaded.diagnostics
    );
}
