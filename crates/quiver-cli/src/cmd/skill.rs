//! `quiver skill`: the reference `agentskills` CLI (skills-ref 0.1.1), output for output.
//!
//! `validate`, `read-properties` and `to-prompt` print what `agentskills` prints, on the same
//! stream, with the same exit code: data and "Valid skill" on stdout, problems on stderr, exit
//! 1 for a failed check, 2 for a usage error (click's usage messages, with `quiver skill` for
//! `agentskills`). As click does, ANSI escape sequences are removed from what goes to a stream
//! that is not a terminal. Options other than `--help` are clap's, not click's.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use quiver_package::skills_ref;

/// Subcommands of `quiver skill`.
#[derive(Debug, clap::Subcommand)]
pub enum SkillCommand {
    /// Validate a skill directory, as `agentskills validate` does.
    ///
    /// Exit codes: 0 valid skill, 1 validation errors found, 2 usage error.
    Validate {
        /// The skill directory (or its SKILL.md).
        #[arg(value_name = "SKILL_PATH")]
        paths: Vec<PathBuf>,
    },
    /// Print a skill's properties as JSON, as `agentskills read-properties` does.
    ///
    /// Exit codes: 0 success, 1 parse error, 2 usage error.
    ReadProperties {
        /// The skill directory (or its SKILL.md).
        #[arg(value_name = "SKILL_PATH")]
        paths: Vec<PathBuf>,
    },
    /// Print the `<available_skills>` XML block, as `agentskills to-prompt` does.
    ///
    /// Exit codes: 0 success, 1 error, 2 usage error.
    ToPrompt {
        /// Skill directories (or their SKILL.md files).
        #[arg(value_name = "SKILL_PATHS")]
        paths: Vec<PathBuf>,
    },
}

/// Runs `quiver skill`.
pub fn run(command: SkillCommand) -> miette::Result<ExitCode> {
    Ok(match command {
        SkillCommand::Validate { paths } => match single_path("validate", &paths) {
            Ok(path) => validate(&path),
            Err(code) => code,
        },
        SkillCommand::ReadProperties { paths } => match single_path("read-properties", &paths) {
            Ok(path) => read_properties(&path),
            Err(code) => code,
        },
        SkillCommand::ToPrompt { paths } => to_prompt(&paths),
    })
}

fn validate(path: &Path) -> ExitCode {
    let path = skill_dir(path);
    let problems = skills_ref::validate(&path);
    let shown = skills_ref::display_path(&path);
    if problems.is_empty() {
        echo(&format!("Valid skill: {shown}"));
        return ExitCode::SUCCESS;
    }
    echo_err(&format!("Validation failed for {shown}:"));
    for problem in &problems {
        echo_err(&format!("  - {problem}"));
    }
    ExitCode::FAILURE
}

fn read_properties(path: &Path) -> ExitCode {
    match skills_ref::read_properties(&skill_dir(path)) {
        Ok(properties) => {
            echo(&skills_ref::python_json(&properties));
            ExitCode::SUCCESS
        }
        Err(error) => {
            echo_err(&format!("Error: {error}"));
            ExitCode::FAILURE
        }
    }
}

fn to_prompt(paths: &[PathBuf]) -> ExitCode {
    const COMMAND: &str = "to-prompt";
    const PARAM: &str = "SKILL_PATHS...";
    if paths.is_empty() {
        return usage_error(COMMAND, PARAM, &format!("Missing argument '{PARAM}'."));
    }
    for path in paths {
        if let Err(code) = check_exists(COMMAND, PARAM, path) {
            return code;
        }
    }
    let dirs: Vec<PathBuf> = paths.iter().map(|p| skill_dir(p)).collect();
    match skills_ref::to_prompt(&dirs) {
        Ok(text) => {
            echo(&text);
            ExitCode::SUCCESS
        }
        Err(error) => {
            echo_err(&format!("Error: {error}"));
            ExitCode::FAILURE
        }
    }
}

/// click's handling of one `SKILL_PATH` argument (`click.Path(exists=True)`).
fn single_path(command: &str, paths: &[PathBuf]) -> Result<PathBuf, ExitCode> {
    const PARAM: &str = "SKILL_PATH";
    let Some(first) = paths.first() else {
        return Err(usage_error(
            command,
            PARAM,
            &format!("Missing argument '{PARAM}'."),
        ));
    };
    check_exists(command, PARAM, first)?;
    let extra: Vec<String> = paths[1..]
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    match extra.len() {
        0 => Ok(first.clone()),
        1 => Err(usage_error(
            command,
            PARAM,
            &format!("Got unexpected extra argument ({})", extra[0]),
        )),
        _ => Err(usage_error(
            command,
            PARAM,
            &format!("Got unexpected extra arguments ({})", extra.join(" ")),
        )),
    }
}

fn check_exists(command: &str, param: &str, path: &Path) -> Result<(), ExitCode> {
    if std::fs::metadata(path).is_ok() {
        return Ok(());
    }
    let shown = skills_ref::python_repr(&path.to_string_lossy());
    Err(usage_error(
        command,
        param,
        &format!("Invalid value for '{param}': Path {shown} does not exist."),
    ))
}

fn usage_error(command: &str, param: &str, message: &str) -> ExitCode {
    echo_err(&format!(
        "Usage: quiver skill {command} [OPTIONS] {param}\nTry 'quiver skill {command} --help' for help.\n\nError: {message}"
    ));
    ExitCode::from(2)
}

/// A path naming a skill file (`SKILL.md`, any case) stands for its directory.
fn skill_dir(path: &Path) -> PathBuf {
    if path.is_file() && skills_ref::path_name(path).to_lowercase() == "skill.md" {
        skills_ref::path_parent(path)
    } else {
        path.to_path_buf()
    }
}

fn echo(text: &str) {
    let text = if std::io::stdout().is_terminal() {
        text.to_owned()
    } else {
        strip_ansi(text)
    };
    crate::out(&text);
}

fn echo_err(text: &str) {
    let text = if std::io::stderr().is_terminal() {
        text.to_owned()
    } else {
        strip_ansi(text)
    };
    crate::err(&text);
}

/// click's `strip_ansi`: removes `ESC [ params intermediates final` sequences.
fn strip_ansi(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '\u{1b}' && chars.get(i + 1) == Some(&'[') {
            let mut j = i + 2;
            while j < chars.len() && ('0'..='?').contains(&chars[j]) {
                j += 1;
            }
            while j < chars.len() && (' '..='/').contains(&chars[j]) {
                j += 1;
            }
            if j < chars.len() && ('@'..='~').contains(&chars[j]) {
                i = j + 1;
                continue;
            }
        }
        out.push(chars[i]);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::strip_ansi;

    #[test]
    fn strips_ansi_like_click() {
        assert_eq!(strip_ansi("a\u{1b}[1;31mred\u{1b}[0m b"), "ared b");
        assert_eq!(strip_ansi("\u{1b}[?25l x"), " x");
        assert_eq!(strip_ansi("\u{1b}[ x"), "");
        assert_eq!(strip_ansi("\u{1b}[1"), "\u{1b}[1");
        assert_eq!(strip_ansi("\u{1b}x"), "\u{1b}x");
    }
}
