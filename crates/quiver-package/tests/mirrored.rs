//! Skills an MCP server offered, as discovery mirrors them under the server's package folder:
//! loaded as skills of that package, marked with their server, nothing else loaded from them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::Path;

use quiver_package::names::PackageId;
use quiver_package::package::load_mirrored_skills;

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

#[test]
fn mirrored_skills_are_skills_of_the_server_package_and_nothing_more() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("mcp/hub");
    let dir = root.join("skills");
    write(
        &dir,
        "greet/SKILL.md",
        "---\nname: greet\ndescription: Greets.\n---\nSee [forms](forms.md).\n",
    );
    write(&dir, "greet/forms.md", "forms\n");
    write(
        &dir,
        "greet/tools/evil/tool.yaml",
        "description: x\nrun: {command: [sh]}\n",
    );
    write(&dir, "greet/agents/a.md", "---\ndescription: a\n---\nx\n");
    write(
        &dir,
        "天气/SKILL.md",
        "---\nname: 天气\ndescription: 天气预报。\n---\n看[城市](cities.md)。\n",
    );
    write(&dir, "no-skill/readme.md", "x\n");
    let id: PackageId = "hub".parse().unwrap();
    let (skills, diags) = load_mirrored_skills(&root, &dir, &id, "hub");
    let ids: Vec<&str> = skills.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert_eq!(ids[0], "hub/greet");
    assert!(ids[1].starts_with("hub/"), "{ids:?}");
    let greet = &skills[0];
    assert_eq!(greet.from_server.as_deref(), Some("hub"));
    assert_eq!(greet.files, ["agents/a.md", "forms.md"]);
    assert_eq!(greet.read_file("forms.md", 100).unwrap(), "forms\n");
    assert!(greet.unlocks.is_empty());
    let codes: Vec<&str> = diags.iter().map(|d| d.code).collect();
    assert_eq!(codes, ["skill-link-missing"], "{diags:?}");
}
