//! Skills a server offers through the MCP Skills extension (SEP-2640), as Quiver consumes them:
//! each skill's files, fetched by the session ([`crate::McpClient::skills`]: `skills/list`
//! with every file checked against its digest and size where the server declares the
//! extension, else the `skill://` resources of `resources/list`), are written as a folder of
//! the server's package, `<state>/mcp/<server>/skills/<skill>/` ([`write_mirror`]), which
//! the runtime loads as the package's skills: `read_skill` reads them and Quiver's own Skills
//! extension serves them.
//!
//! What a server sends is data: a file's path comes from its URI relative to its skill's root
//! ([`relative_path`]: no `..`, no hidden segment, no empty segment, at most
//! [`MAX_PATH_DEPTH`] deep), a skill's folder name from its name ([`folder_name`]), and the
//! totals are bounded ([`MAX_REMOTE_SKILLS`], [`MAX_SKILL_FILES`], [`MAX_REMOTE_SKILL_BYTES`]).
//! Files under a skill's `tools/` are never written: tools come only from `tools/list`.

use std::path::Path;

use quiver_package::names::ItemName;

pub use quiver_package::skill_files::MAX_SKILL_FILES;

/// Most skills taken from one server.
pub const MAX_REMOTE_SKILLS: usize = 100;
/// Most bytes of skill files taken from one server, all files together.
pub const MAX_REMOTE_SKILL_BYTES: u64 = 64 * 1024 * 1024;
/// Deepest path (in segments) of a file under its skill.
pub const MAX_PATH_DEPTH: usize = 8;
/// The mirror's folder under a server's package folder.
pub const MIRROR_DIR: &str = "skills";

/// One skill as the server sent it: its name and every file with its bytes, `SKILL.md`
/// first, each named relative to the skill's root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteSkill {
    /// The frontmatter's `name` (the last segment of its root URI).
    pub name: String,
    /// (path relative to the skill, bytes); `SKILL.md` is one of them.
    pub files: Vec<(String, Vec<u8>)>,
}

fn percent_decode(segment: &str) -> Option<String> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = segment.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The path of the file at `uri` relative to the skill whose root is `root` (its
/// `SKILL.md`'s URI without `SKILL.md`, ending in `/`): each segment percent-decoded, `None`
/// when the URI is not under the root or a segment is empty, `.`, `..`, hidden, or holds a
/// `/`, `\` or NUL once decoded, or the path is deeper than [`MAX_PATH_DEPTH`].
pub fn relative_path(root: &str, uri: &str) -> Option<String> {
    let rest = uri.strip_prefix(root)?;
    if rest.contains(['?', '#']) {
        return None;
    }
    let mut segments = Vec::new();
    for raw in rest.split('/') {
        let segment = percent_decode(raw)?;
        let bad =
            segment.is_empty() || segment.starts_with('.') || segment.contains(['/', '\\', '\0']);
        if bad {
            return None;
        }
        segments.push(segment);
    }
    (segments.len() <= MAX_PATH_DEPTH).then(|| segments.join("/"))
}

/// The folder a skill named `name` is written to: the name when it is a valid item name
/// (`pdf-forms`), else a stable name derived from it (`天气` → an ASCII name).
pub fn folder_name(name: &str) -> String {
    name.parse::<ItemName>()
        .unwrap_or_else(|_| ItemName::derive(name))
        .to_string()
}

/// Whether the file `path` of a skill is written to the mirror: not under `tools/`.
pub fn mirrored(path: &str) -> bool {
    path.split('/').next() != Some("tools")
}

/// Replaces the mirror `dir` with `skills` (removed when there are none): written into a
/// fresh `<dir>.partial` first, then swapped in, so a reader never sees half of it. Two
/// skills with one folder name: the first is kept. Returns the folders written.
pub fn write_mirror(dir: &Path, skills: &[RemoteSkill]) -> std::io::Result<Vec<String>> {
    let mut partial = dir.as_os_str().to_owned();
    partial.push(".partial");
    let partial = Path::new(&partial);
    if partial.exists() {
        std::fs::remove_dir_all(partial)?;
    }
    let mut written: Vec<String> = Vec::new();
    for skill in skills {
        let folder = folder_name(&skill.name);
        if written.contains(&folder) {
            continue;
        }
        for (path, bytes) in skill.files.iter().filter(|(p, _)| mirrored(p)) {
            let file = partial.join(&folder).join(path);
            if let Some(parent) = file.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(file, bytes)?;
        }
        written.push(folder);
    }
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    if written.is_empty() {
        if partial.exists() {
            std::fs::remove_dir_all(partial)?;
        }
    } else {
        std::fs::rename(partial, dir)?;
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_come_from_uris_under_the_skill_root() {
        let root = "skill://greet/";
        let cases = [
            ("skill://greet/SKILL.md", Some("SKILL.md")),
            ("skill://greet/reference/foo.md", Some("reference/foo.md")),
            ("skill://greet/%E8%A1%A8%E5%8D%95.md", Some("表单.md")),
            ("skill://greet/a%20b.md", Some("a b.md")),
            ("skill://other/x.md", None),
            ("skill://greet/../x.md", None),
            ("skill://greet/%2E%2E/x.md", None),
            ("skill://greet/a%2Fb.md", None),
            ("skill://greet/.env", None),
            ("skill://greet/a//b.md", None),
            ("skill://greet/", None),
            ("skill://greet/x.md?v=1", None),
            ("skill://greet/%ZZ.md", None),
            ("skill://greet/a/b/c/d/e/f/g/h/i.md", None),
            (
                "skill://greet/a/b/c/d/e/f/g/h.md",
                Some("a/b/c/d/e/f/g/h.md"),
            ),
        ];
        for (uri, want) in cases {
            assert_eq!(relative_path(root, uri).as_deref(), want, "{uri}");
        }
    }

    #[test]
    fn folders_and_tools() {
        assert_eq!(folder_name("pdf-forms"), "pdf-forms");
        let derived = folder_name("天气");
        assert!(derived.parse::<ItemName>().is_ok(), "{derived}");
        assert_eq!(derived, folder_name("天气"));
        for (path, want) in [
            ("SKILL.md", true),
            ("scripts/run.py", true),
            ("tools/x/tool.yaml", false),
            ("docs/tools/x.md", true),
        ] {
            assert_eq!(mirrored(path), want, "{path}");
        }
    }

    #[test]
    fn the_mirror_is_replaced_whole() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("skills");
        let skill = |name: &str, files: &[(&str, &str)]| RemoteSkill {
            name: name.into(),
            files: files
                .iter()
                .map(|(p, b)| ((*p).to_owned(), b.as_bytes().to_vec()))
                .collect(),
        };
        let first = [
            skill("greet", &[("SKILL.md", "a"), ("reference/foo.md", "b")]),
            skill("old", &[("SKILL.md", "c"), ("tools/t/tool.yaml", "run")]),
        ];
        assert_eq!(write_mirror(&dir, &first).unwrap(), ["greet", "old"]);
        assert_eq!(
            std::fs::read_to_string(dir.join("greet/reference/foo.md")).unwrap(),
            "b"
        );
        assert!(!dir.join("old/tools").exists());
        let second = [skill("greet", &[("SKILL.md", "new")])];
        assert_eq!(write_mirror(&dir, &second).unwrap(), ["greet"]);
        assert!(!dir.join("old").exists() && !dir.join("greet/reference").exists());
        assert_eq!(write_mirror(&dir, &[]).unwrap(), Vec::<String>::new());
        assert!(!dir.exists());
    }
}
