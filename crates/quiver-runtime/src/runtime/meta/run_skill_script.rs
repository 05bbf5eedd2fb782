//! `run_skill_script(skill, script, args)`: runs a file from the `scripts/` folder of an
//! active skill in its package's sandbox, with the package's permissions (`permissions` in
//! `quiver.yaml`; none without a manifest), so plain Agent Skills folders whose instructions
//! run scripts work. The interpreter comes from the extension, else from the `#!` line.

use std::path::{Component, Path, PathBuf};

use quiver_policy::ToolFacts;
use quiver_store::AuditEntry;
use serde_json::{Value, json};

use crate::runtime::call::{CallKind, Runs, Target};
use crate::runtime::turn::find_skill;
use crate::runtime::{CallOutcome, CallStatus, RuntimeError, Turn};

/// The name a skill script's calls have in the policy, the audit and hooks
/// (`<package>.run_skill_script`).
const SCRIPT_TOOL: &str = "run_skill_script";

/// The command that runs `script`: an interpreter chosen by extension, or the file itself
/// when it starts with `#!`.
fn script_command(script: &Path) -> Result<Vec<String>, String> {
    let path = script.to_string_lossy().into_owned();
    let interpreter = match script.extension().and_then(|e| e.to_str()) {
        Some("py") => Some("python3"),
        Some("sh") => Some("sh"),
        Some("bash") => Some("bash"),
        Some("js" | "mjs" | "cjs") => Some("node"),
        Some("rb") => Some("ruby"),
        Some("pl") => Some("perl"),
        _ => None,
    };
    match interpreter {
        Some(i) => Ok(vec![i.to_owned(), path]),
        None => {
            let mut head = [0u8; 2];
            std::fs::File::open(script)
                .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
                .map_err(|e| format!("cannot read the script: {e}"))?;
            if &head == b"#!" {
                Ok(vec![path])
            } else {
                Err("cannot tell how to run it: use a .py, .sh, .bash, .js, .rb or .pl file, or start it with a #! line".into())
            }
        }
    }
}

/// `script` as a path inside `scripts/`: relative, no `..`, `scripts/` prefix optional.
fn script_path(script: &str) -> Option<PathBuf> {
    let relative = script.strip_prefix("scripts/").unwrap_or(script);
    let path = Path::new(relative);
    let plain = path.components().all(|c| matches!(c, Component::Normal(_)));
    (plain && !relative.is_empty()).then(|| path.to_owned())
}

impl Turn<'_> {
    /// Runs the `run_skill_script` meta-tool.
    pub(in crate::runtime) fn run_skill_script(
        &mut self,
        call_id: &str,
        arguments: &Value,
        audit: &mut AuditEntry,
    ) -> Result<CallOutcome, RuntimeError> {
        let fail =
            |status, message: String| CallOutcome::new(call_id, status, json!({"error": message}));
        let (Some(skill_id), Some(script)) = (
            arguments.get("skill").and_then(Value::as_str),
            arguments.get("script").and_then(Value::as_str),
        ) else {
            return Ok(fail(
                CallStatus::Invalid,
                "invalid arguments: `skill` and `script` are required strings".into(),
            ));
        };
        let args: Vec<String> = match arguments.get("args") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => match items
                .iter()
                .map(|v| v.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
            {
                Some(args) => args,
                None => {
                    return Ok(fail(
                        CallStatus::Invalid,
                        "invalid arguments: `args` must be a list of strings".into(),
                    ));
                }
            },
            Some(_) => {
                return Ok(fail(
                    CallStatus::Invalid,
                    "invalid arguments: `args` must be a list of strings".into(),
                ));
            }
        };
        let active = self.runtime.store.active_skills(&self.session)?;
        // The skill as this turn may see it, looked up in the turn's own snapshot.
        let catalog = self.catalog.clone();
        let visible = self.skill_visible(skill_id).is_some();
        let found = find_skill(&catalog, self.own_agent.as_ref(), skill_id);
        let Some((package, skill)) = found.filter(|_| visible) else {
            return Ok(fail(
                CallStatus::Error,
                format!("no such skill: {skill_id}"),
            ));
        };
        if !active.iter().any(|s| s == skill_id) {
            return Ok(fail(
                CallStatus::Error,
                format!("skill `{skill_id}` is not active: read it with read_skill first"),
            ));
        }
        if let Some(server) = &skill.from_server {
            return Ok(fail(
                CallStatus::Error,
                format!(
                    "skill `{skill_id}` comes from the MCP server `{server}`: its scripts can be read with read_skill, not run"
                ),
            ));
        }
        let scripts = skill.dir.join("scripts");
        let found = script_path(script)
            .map(|rel| scripts.join(rel))
            .and_then(|p| std::fs::canonicalize(p).ok())
            .filter(|p| {
                p.is_file() && std::fs::canonicalize(&scripts).is_ok_and(|root| p.starts_with(root))
            });
        let Some(path) = found else {
            return Ok(fail(
                CallStatus::Error,
                format!("no script `{script}` in the scripts/ folder of skill `{skill_id}`"),
            ));
        };
        let mut command = match script_command(&path) {
            Ok(command) => command,
            Err(why) => return Ok(fail(CallStatus::Error, format!("`{script}`: {why}"))),
        };
        command.extend(args);
        // A script is an `action` call of its package, with the package's permissions: the
        // control plane, the turn's lockouts, consent, approval and hooks apply as to any tool.
        let mut facts = ToolFacts::new(package.id.as_str(), SCRIPT_TOOL);
        facts.permission = &package.manifest.permissions;
        facts.package_permission = Some(&package.manifest.permissions);
        let target = Target {
            kind: CallKind::SkillScript,
            asked_as: SCRIPT_TOOL.to_owned(),
            qualified: format!("{}.{SCRIPT_TOOL}", package.id),
            package,
            facts,
            item: None,
            offered: true,
            touch: false,
            input: None,
            first_string: Some(script.to_owned()),
            runs: Runs::Script {
                skill,
                command,
                script: script.trim_start_matches("scripts/").to_owned(),
            },
        };
        self.run_target(call_id, &target, arguments.clone(), audit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_paths_stay_inside_scripts() {
        let cases = [
            ("run.py", Some("run.py")),
            ("scripts/run.py", Some("run.py")),
            ("tools/a.sh", Some("tools/a.sh")),
            ("../secret.py", None),
            ("scripts/../../x", None),
            ("/etc/passwd", None),
            ("", None),
        ];
        for (input, want) in cases {
            assert_eq!(script_path(input), want.map(PathBuf::from), "{input}");
        }
    }

    #[test]
    fn interpreters_by_extension_and_shebang() {
        let dir = tempfile::tempdir().unwrap();
        let with = |name: &str, text: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, text).unwrap();
            p
        };
        let py = with("a.py", "print(1)");
        assert_eq!(script_command(&py).unwrap()[0], "python3");
        assert_eq!(script_command(&with("b.sh", "echo")).unwrap()[0], "sh");
        let shebang = with("c", "#!/usr/bin/env python3\n");
        assert_eq!(
            script_command(&shebang).unwrap(),
            [shebang.to_string_lossy()]
        );
        assert!(script_command(&with("d.txt", "hello")).is_err());
    }
}
