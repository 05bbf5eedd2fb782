//! The Skills extension: skills/list, skills/get, resources/read, resources/directory/read,
//! and activation by reading a SKILL.md.

use quiver_mcp::skills::sha256_digest;
use rmcp::model::{
    GetSkillRequestParams, ReadResourceDirectoryRequestParams, ReadResourceRequestParams,
    ResourceContents, SkillResources,
};
use serde_json::json;

use super::harness::{Scripted, body, call, connect, examples, front};

#[tokio::test(flavor = "multi_thread")]
async fn skills_are_listed_with_verbatim_frontmatter_and_digests() {
    let dir = tempfile::tempdir().unwrap();
    let client = connect(front(dir.path()), Scripted::default()).await;
    let listed = client.list_skills(None).await.unwrap();
    let uris: Vec<&str> = listed.skills.iter().map(|s| s.uri.as_str()).collect();
    assert_eq!(
        uris,
        [
            "skill://daily-report/weekly/SKILL.md",
            "skill://weather/SKILL.md"
        ]
    );
    let weather = client
        .get_skill(GetSkillRequestParams::new("skill://weather/SKILL.md"))
        .await
        .unwrap()
        .skill;
    assert_eq!(weather.frontmatter.name, "weather");
    let SkillResources::Files(files) = &weather.resources else {
        panic!("a manifest")
    };
    let on_disk = std::fs::read(examples().join("weather/references/cities.md")).unwrap();
    let cities = files
        .iter()
        .find(|f| f.uri == "skill://weather/references/cities.md")
        .unwrap();
    assert_eq!(
        (cities.digest.as_str(), cities.size),
        (sha256_digest(&on_disk).as_str(), on_disk.len() as u64)
    );
    // Every file's bytes match its digest.
    for file in files {
        let read = client
            .read_resource(ReadResourceRequestParams::new(file.uri.clone()))
            .await
            .unwrap();
        let bytes = match &read.contents[0] {
            ResourceContents::TextResourceContents { text, .. } => text.as_bytes().to_vec(),
            other => panic!("{other:?}"),
        };
        file.verify(&bytes).unwrap();
    }
    // The frontmatter is as written: every key of the file is there.
    let text = std::fs::read_to_string(examples().join("weather/SKILL.md")).unwrap();
    for key in weather.frontmatter.extra.keys() {
        assert!(text.contains(&format!("{key}:")), "{key}");
    }
    let unknown = client
        .get_skill(GetSkillRequestParams::new("skill://nope/SKILL.md"))
        .await
        .unwrap_err()
        .to_string();
    assert!(unknown.contains("unknown skill"), "{unknown}");
}

#[tokio::test(flavor = "multi_thread")]
async fn directories_list_their_children() {
    let dir = tempfile::tempdir().unwrap();
    let client = connect(front(dir.path()), Scripted::default()).await;
    let root = client
        .read_resource_directory(ReadResourceDirectoryRequestParams::new("skill://weather"))
        .await
        .unwrap();
    let names: Vec<(&str, Option<&str>)> = root
        .resources
        .iter()
        .map(|r| (r.name.as_str(), r.mime_type.as_deref()))
        .collect();
    assert_eq!(
        names,
        [
            ("SKILL.md", Some("text/markdown")),
            ("references", Some("inode/directory"))
        ]
    );
    let refs = client
        .read_resource_directory(ReadResourceDirectoryRequestParams::new(
            "skill://weather/references/",
        ))
        .await
        .unwrap();
    assert_eq!(
        refs.resources[0].uri,
        "skill://weather/references/cities.md"
    );
    let error = client
        .read_resource_directory(ReadResourceDirectoryRequestParams::new(
            "skill://weather/SKILL.md",
        ))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("not a directory"), "{error}");
}

#[tokio::test(flavor = "multi_thread")]
async fn reading_skill_md_activates_the_skill_in_the_conversation() {
    let dir = tempfile::tempdir().unwrap();
    let client = connect(front(dir.path()), Scripted::default()).await;
    let read = client
        .read_resource(ReadResourceRequestParams::new("skill://weather/SKILL.md"))
        .await
        .unwrap();
    assert_eq!(
        read.meta.unwrap()["io.quiver/skill"],
        json!({"id": "weather", "status": "activated"})
    );
    // read_skill in the same conversation now says it is already active.
    let again = call(&client, "read_skill", json!({"id": "weather"})).await;
    assert!(
        body(&again)["status"]
            .as_str()
            .unwrap()
            .contains("already active")
    );
}

/// Issue 22 item 17: listing a skill's files reads their metadata, never their bytes: a
/// skill with 4 sparse 16 MiB files and one over the bound is listed (the large one left
/// out, the skill still served) with nothing read into memory, and a file's bytes are read
/// only when it is read.
#[tokio::test(flavor = "multi_thread")]
async fn listing_large_skill_files_reads_none_of_them() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("packages");
    let skill = root.join("bulky");
    std::fs::create_dir_all(skill.join("assets")).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: bulky\ndescription: A skill with large data files.\n---\nSee the assets.\n",
    )
    .unwrap();
    std::fs::write(skill.join("assets/note.txt"), "small").unwrap();
    let bound = quiver_package::source::MAX_SKILL_ASSET_BYTES;
    for (name, size) in [
        ("a.bin", bound),
        ("b.bin", bound),
        ("c.bin", bound),
        ("d.bin", bound),
        ("huge.bin", bound + 1),
    ] {
        let file = std::fs::File::create(skill.join("assets").join(name)).unwrap();
        file.set_len(size).unwrap();
    }
    let front = super::harness::front_over(&[root], dir.path(), quiver_mcp::McpConfig::default());
    let client = connect(front.clone(), Scripted::default()).await;
    let listed = client.list_all_resources().await.unwrap();
    let sizes: Vec<(&str, Option<u64>)> = listed
        .iter()
        .filter(|r| r.uri.starts_with("skill://bulky/"))
        .map(|r| (r.uri.as_str(), r.size))
        .collect();
    let big = Some(bound);
    assert_eq!(
        sizes,
        [
            ("skill://bulky/SKILL.md", Some(80)),
            ("skill://bulky/assets/a.bin", big),
            ("skill://bulky/assets/b.bin", big),
            ("skill://bulky/assets/c.bin", big),
            ("skill://bulky/assets/d.bin", big),
            ("skill://bulky/assets/note.txt", Some(5)),
        ]
    );
    assert_eq!(front.skill_index().bytes_read(), 0);
    let read = client
        .read_resource(ReadResourceRequestParams::new(
            "skill://bulky/assets/note.txt",
        ))
        .await
        .unwrap();
    assert!(matches!(
        &read.contents[0],
        ResourceContents::TextResourceContents { text, .. } if text == "small"
    ));
    assert_eq!(front.skill_index().bytes_read(), 5);
}

/// Issue 23 item 3: every file of a skill's folder is served (Anthropic's
/// `mcp-builder/reference/*.md`, a root-level `forms.md`), and still never a hidden file, a
/// link that leaves the package, or another skill's files through its package's skill.
#[tokio::test(flavor = "multi_thread")]
async fn every_file_of_a_skill_folder_is_a_resource() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("packages");
    let skill = root.join("mcp-builder");
    std::fs::create_dir_all(skill.join("reference")).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: mcp-builder\ndescription: Build MCP servers.\n---\nSee [forms](forms.md).\n",
    )
    .unwrap();
    std::fs::write(skill.join("forms.md"), "forms").unwrap();
    std::fs::write(skill.join("reference/foo.md"), "foo").unwrap();
    std::fs::write(skill.join(".env"), "SECRET=1").unwrap();
    std::fs::write(dir.path().join("outside.md"), "CANARY").unwrap();
    symlink(dir.path().join("outside.md"), skill.join("out.md")).unwrap();
    let front = super::harness::front_over(&[root], dir.path(), quiver_mcp::McpConfig::default());
    let client = connect(front, Scripted::default()).await;
    let listed = client.list_all_resources().await.unwrap();
    let uris: Vec<&str> = listed
        .iter()
        .filter(|r| r.uri.starts_with("skill://mcp-builder/"))
        .map(|r| r.uri.as_str())
        .collect();
    assert_eq!(
        uris,
        [
            "skill://mcp-builder/SKILL.md",
            "skill://mcp-builder/forms.md",
            "skill://mcp-builder/reference/foo.md",
        ]
    );
    for (uri, want) in [
        ("skill://mcp-builder/forms.md", "forms"),
        ("skill://mcp-builder/reference/foo.md", "foo"),
    ] {
        let read = client
            .read_resource(ReadResourceRequestParams::new(uri))
            .await
            .unwrap();
        assert!(
            matches!(&read.contents[0], ResourceContents::TextResourceContents { text, .. } if text == want),
            "{uri}: {read:?}"
        );
    }
    for uri in ["skill://mcp-builder/.env", "skill://mcp-builder/out.md"] {
        let error = client
            .read_resource(ReadResourceRequestParams::new(uri))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            !error.contains("CANARY") && !error.contains("SECRET"),
            "{error}"
        );
    }
    let children = client
        .read_resource_directory(ReadResourceDirectoryRequestParams::new(
            "skill://mcp-builder",
        ))
        .await
        .unwrap();
    let names: Vec<&str> = children.resources.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["SKILL.md", "forms.md", "reference"]);
}
