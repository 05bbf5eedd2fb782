//! A skill's `tools:` unlocks its own tools and its package's exposed items, nothing else.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::Path;

use quiver_package::load_package;

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn tool(extra: &str) -> String {
    format!("description: t\ncategory: perception\nrun: {{command: [a]}}\n{extra}")
}

/// A package `gem` with an exposed root tool, a private one, a hidden one, an exposed agent,
/// a skill `own` with a tool of its own, a skill `other` with one too, and an agent with a
/// skill whose own folder has a tool.
fn gem(root: &Path) {
    write(root, "quiver.yaml", "id: gem\n");
    write(root, "tools/public/tool.yaml", &tool("expose: true\n"));
    write(root, "tools/private/tool.yaml", &tool(""));
    write(
        root,
        "tools/hidden/tool.yaml",
        &tool("expose: true\nhidden: true\n"),
    );
    write(
        root,
        "agents/helper.md",
        "---\ndescription: helps\nexpose: true\n---\nYou help.\n",
    );
    write(
        root,
        "skills/other/SKILL.md",
        "---\nname: other\ndescription: d\n---\n",
    );
    write(root, "skills/other/tools/theirs/tool.yaml", &tool(""));
    write(root, "skills/own/tools/mine/tool.yaml", &tool(""));
    write(root, "skills/own/tools/mine2/tool.yaml", &tool(""));
    write(root, "agents/crew/agent.yaml", "description: d\n");
    write(root, "agents/crew/system.md", "You work.\n");
    write(root, "agents/crew/boundaries.md", "No.\n");
    write(root, "agents/crew/conventions.md", "Yes.\n");
    write(
        root,
        "agents/crew/skills/drill/SKILL.md",
        "---\nname: drill\ndescription: d\n---\n",
    );
    write(
        root,
        "agents/crew/skills/drill/tools/bit/tool.yaml",
        &tool(""),
    );
}

#[test]
fn tools_names_own_tools_and_exposed_items_only() {
    let cases: &[(&str, &[&str], &[&str])] = &[
        ("", &["mine", "mine2"], &[]),
        ("tools: [mine]\n", &["mine"], &[]),
        (
            "tools: public helper mine\n",
            &["public", "helper", "mine"],
            &[],
        ),
        ("tools: [gem.public]\n", &["public"], &[]),
        ("tools: [private]\n", &[], &["skill-tool-private"]),
        ("tools: [hidden]\n", &[], &["skill-tool-private"]),
        ("tools: [theirs]\n", &[], &["skill-tool-not-allowed"]),
        ("tools: [bit]\n", &[], &["skill-tool-not-allowed"]),
        (
            "tools: [weather.forecast]\n",
            &[],
            &["skill-tool-not-allowed"],
        ),
        ("tools: [nope, mine]\n", &["mine"], &["skill-unknown-tool"]),
        ("tools: [read_skill]\n", &[], &["skill-unknown-tool"]),
    ];
    for (tools, unlocks, codes) in cases {
        let tmp = tempfile::tempdir().unwrap();
        gem(tmp.path());
        write(
            tmp.path(),
            "skills/own/SKILL.md",
            &format!("---\nname: own\ndescription: d\n{tools}---\nbody\n"),
        );
        let loaded = load_package(tmp.path());
        let got: Vec<_> = loaded.diagnostics.iter().map(|d| d.code).collect();
        assert_eq!(got, *codes, "{tools}: {:?}", loaded.diagnostics);
        assert!(loaded.diagnostics.iter().all(|d| d.is_error()));
        if tools.contains("private") {
            let help = loaded.diagnostics[0].help.as_deref().unwrap();
            assert!(
                help.contains("package's own agents and workflows"),
                "{help}"
            );
        }
        let p = loaded.package.unwrap();
        let own = p.skills.iter().find(|s| s.id == "gem/own").unwrap();
        assert_eq!(own.unlocks, *unlocks, "{tools}");
        let other = p.skills.iter().find(|s| s.id == "gem/other").unwrap();
        assert_eq!(other.unlocks, ["theirs"]);
        let drill = &p
            .agents
            .iter()
            .find(|a| a.name.as_str() == "crew")
            .unwrap()
            .own_skills[0];
        assert_eq!(drill.unlocks, ["bit"]);
    }
}
