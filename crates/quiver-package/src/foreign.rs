//! Folders laid out for another system, which Quiver would otherwise pass over without a word:
//! a zhin.js plugin (`tools/<tool>/index.ts`) and a `manifest.yaml` of the agent-skills
//! library's shape (seed 001: a tool manifest with `inputs`, or a package manifest). Each gets
//! a diagnostic that says what to rename or add.
//!
//! ```
//! # let dir = tempfile::tempdir().unwrap();
//! std::fs::create_dir_all(dir.path().join("tools/weather")).unwrap();
//! std::fs::write(dir.path().join("tools/weather/index.ts"), "export default {}").unwrap();
//! let d = quiver_package::foreign::package_diagnostic(dir.path()).unwrap();
//! assert_eq!(d.code, quiver_package::foreign::CODE);
//! assert!(d.message.contains("zhin.js"));
//! ```

use std::path::Path;

use crate::Diagnostic;

/// The code of the diagnostic for a folder laid out for another system.
pub const CODE: &str = "package-foreign-layout";

/// Entry points of a zhin.js tool folder.
const ZHIN_ENTRIES: [&str; 4] = ["index.ts", "index.js", "index.mjs", "index.cjs"];

/// Manifest files of the agent-skills library's layout.
const MANIFESTS: [&str; 2] = ["manifest.yaml", "manifest.yml"];

/// Top-level keys that make a manifest a tool's (its input schema under one of its names).
const TOOL_KEYS: [&str; 5] = ["inputs", "input", "inputSchema", "parameters", "entrypoint"];

/// The largest manifest read to tell its shape.
const MAX_MANIFEST: u64 = 64 * 1024;

/// The diagnostic for `dir`, a folder Quiver does not read as a package (no `quiver.yaml`, no
/// `SKILL.md`), when it is laid out as another system's package; `None` otherwise.
pub fn package_diagnostic(dir: &Path) -> Option<Diagnostic> {
    let tools = zhin_tools(dir);
    if !tools.is_empty() {
        let shown = tools
            .iter()
            .map(|(tool, entry)| format!("`tools/{tool}/{entry}`"))
            .collect::<Vec<_>>()
            .join(", ");
        return Some(
            Diagnostic::warning(
                CODE,
                dir,
                format!("this folder looks like a zhin.js plugin ({shown}) and is not loaded: it has no `quiver.yaml`"),
            )
            .with_help(format!(
                "add `quiver.yaml` here (`id`, `name`, `version`, `description`), and beside each entry point a `tool.yaml` that declares the tool and how to run it (`run: {{command: [node, index.js]}}` for a compiled file); `quiver new tool NAME --dir {}` writes one",
                dir.display()
            )),
        );
    }
    let (name, text) = manifest(dir)?;
    let help = if is_tool_manifest(&text) {
        "a tool manifest (`inputs`): move it to `tools/<tool>/tool.yaml` in a package and add `quiver.yaml` (`id`, `name`, `version`, `description`) to that package; `inputs` is read as `input`"
    } else {
        "a package manifest: rename it to `quiver.yaml` (`id`, `name`, `version`, `description`, `permissions`); tools go in `tools/<tool>/tool.yaml`"
    };
    Some(
        Diagnostic::warning(
            CODE,
            dir.join(name),
            format!("`{name}` is another system's manifest; Quiver reads `quiver.yaml` and `tool.yaml`, so this folder is not loaded"),
        )
        .with_help(help),
    )
}

/// What to do with a folder under `tools/` that has no `tool.yaml`, when it holds another
/// system's tool (a zhin.js `index.ts`, a `manifest.yaml`).
pub fn tool_help(dir: &Path) -> Option<String> {
    if let Some(entry) = ZHIN_ENTRIES.iter().find(|e| dir.join(e).is_file()) {
        return Some(format!(
            "`{entry}` is a zhin.js tool: add a `tool.yaml` here that declares it (`description`, `input`) and how to run it (`run: {{command: [node, index.js]}}` for a compiled file)"
        ));
    }
    let (name, _) = manifest(dir)?;
    Some(format!(
        "rename `{name}` to `tool.yaml` (its `inputs` are read as `input`)"
    ))
}

/// The zhin.js tools under `dir/tools`: each tool folder with an entry point and no
/// `tool.yaml`, with that entry point's name.
fn zhin_tools(dir: &Path) -> Vec<(String, &'static str)> {
    let Ok(read) = std::fs::read_dir(dir.join("tools")) else {
        return Vec::new();
    };
    let mut tools: Vec<(String, &'static str)> = read
        .flatten()
        .filter(|e| e.path().is_dir() && !e.path().join("tool.yaml").exists())
        .filter_map(|e| {
            let entry = ZHIN_ENTRIES.iter().find(|n| e.path().join(n).is_file())?;
            Some((e.file_name().to_string_lossy().into_owned(), *entry))
        })
        .collect();
    tools.sort();
    tools
}

/// The manifest file in `dir` and its text (empty when it cannot be read or is too large).
fn manifest(dir: &Path) -> Option<(&'static str, String)> {
    let name = MANIFESTS.into_iter().find(|m| dir.join(m).is_file())?;
    let path = dir.join(name);
    let text = std::fs::metadata(&path)
        .ok()
        .filter(|m| m.len() <= MAX_MANIFEST)
        .and_then(|_| std::fs::read_to_string(&path).ok())
        .unwrap_or_default();
    Some((name, text))
}

/// Whether a manifest's top-level keys are a tool's.
fn is_tool_manifest(text: &str) -> bool {
    text.lines().any(|line| {
        line.split_once(':')
            .is_some_and(|(key, _)| TOOL_KEYS.contains(&key.trim_end()) && !line.starts_with(' '))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (files, whether the folder is reported, a word of the message, a word of the help).
    type Case<'a> = (&'a [(&'a str, &'a str)], Option<(&'a str, &'a str)>);

    #[test]
    fn another_systems_packages_are_named_with_the_fix() {
        let cases: &[Case<'_>] = &[
            (
                &[("tools/weather/index.ts", "")],
                Some(("zhin.js", "quiver.yaml")),
            ),
            (
                &[("tools/a/index.js", ""), ("package.json", "{}")],
                Some(("`tools/a/index.js`", "tool.yaml")),
            ),
            (
                &[("tools/a/tool.yaml", "x: 1"), ("tools/a/index.ts", "")],
                None,
            ),
            (
                &[(
                    "manifest.yaml",
                    "name: x\ninputs:\n  city: {type: string}\n",
                )],
                Some(("manifest.yaml", "tools/<tool>/tool.yaml")),
            ),
            (
                &[("manifest.yml", "id: x\nversion: 1.0.0\ntools: [a]\n")],
                Some(("manifest.yml", "rename it to `quiver.yaml`")),
            ),
            (
                &[("manifest.yaml", "id: x\nnested:\n  inputs: 1\n")],
                Some(("manifest.yaml", "rename it to `quiver.yaml`")),
            ),
            (&[("README.md", "# notes"), ("lib/x.py", "")], None),
            (&[("tools/readme.txt", "")], None),
        ];
        for (files, want) in cases {
            let dir = tempfile::tempdir().unwrap();
            for (rel, text) in *files {
                let path = dir.path().join(rel);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(path, text).unwrap();
            }
            let got = package_diagnostic(dir.path());
            match (got, want) {
                (None, None) => {}
                (Some(d), Some((message, help))) => {
                    assert_eq!(d.code, CODE);
                    assert!(d.message.contains(message), "{files:?}: {}", d.message);
                    assert!(
                        d.help.as_deref().unwrap_or("").contains(help),
                        "{files:?}: {:?}",
                        d.help
                    );
                }
                (got, want) => panic!("{files:?}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn a_tool_folder_of_another_system_says_what_to_add() {
        let cases: &[(&str, Option<&str>)] = &[
            ("index.ts", Some("zhin.js tool")),
            (
                "manifest.yaml",
                Some("rename `manifest.yaml` to `tool.yaml`"),
            ),
            ("main.py", None),
        ];
        for (file, want) in cases {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join(file), "").unwrap();
            let got = tool_help(dir.path());
            assert_eq!(got.is_some(), want.is_some(), "{file}: {got:?}");
            if let (Some(got), Some(want)) = (got, want) {
                assert!(got.contains(want), "{file}: {got}");
            }
        }
    }
}
