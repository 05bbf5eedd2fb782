//! Hooks: the operator's checks that run before a tool call executes, and that can only block
//! it. A hook runs after the arguments are validated and before anyone is asked to approve, so
//! nobody is asked about a call a hook refuses. **A hook that fails — an error, a panic, a
//! crash, a timeout or an answer that cannot be read — blocks the call** (unlike zhin.js, where
//! a throwing hook is skipped): a safety check that did not run has not passed.
//!
//! Two kinds: [`Hook`] implemented in-process by an embedder, and [`CommandHook`], a program
//! from the runtime configuration that gets the [`HookEvent`] as JSON on stdin and answers by
//! its exit status: `0` lets the call go on (unless stdout holds
//! `{"decision": "block", "reason": ...}`), `2` blocks it with stderr as the reason, anything
//! else is a failure.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use thiserror::Error;

/// What a hook is told about a call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HookEvent {
    /// Always `before_call`.
    pub event: &'static str,
    /// The session.
    pub session: String,
    /// The call's id.
    pub call_id: String,
    /// The tool, `<package>.<tool>`.
    pub tool: String,
    /// Its package.
    pub package: String,
    /// The validated arguments, with `secret` fields replaced by `"[secret]"`.
    pub arguments: Value,
    /// Who asked.
    pub principal: Value,
    /// Where the conversation is.
    pub origin: Value,
    /// Whether nobody is present.
    pub unattended: bool,
    /// The tool's category (`perception`, `decision`, `action`).
    pub category: String,
}

/// A hook's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookVerdict {
    /// The call goes on to the approval step.
    Continue,
    /// The call is refused with this reason.
    Block(String),
}

/// Why a hook could not answer; the call is refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{0}")]
pub struct HookError(pub String);

/// A check before a call. Implementations must be quick: they run on the call's thread.
pub trait Hook: Send + Sync {
    /// The name used in refusals and the audit.
    fn name(&self) -> &str;

    /// Whether this hook looks at calls of `tool` (`<package>.<tool>`).
    fn applies_to(&self, tool: &str) -> bool;

    /// Looks at a call about to run.
    fn before_call(&self, event: &HookEvent) -> Result<HookVerdict, HookError>;
}

/// A command hook as written in the configuration.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandHookSpec {
    /// Its name.
    pub name: String,
    /// The program and its arguments.
    pub command: Vec<String>,
    /// Which tools it looks at: `<package>.<tool>` patterns where `*` matches any run of
    /// characters; every tool when empty.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Seconds before the program is killed and the call refused (default 10).
    #[serde(default = "default_hook_timeout")]
    pub timeout: u64,
    /// Its working directory (default: the runtime's).
    #[serde(default)]
    pub cwd: Option<PathBuf>,
}

fn default_hook_timeout() -> u64 {
    10
}

/// A program that answers for each call (see the module documentation).
#[derive(Debug, Clone)]
pub struct CommandHook {
    spec: CommandHookSpec,
}

impl CommandHook {
    /// The hook described by `spec`.
    pub fn new(spec: CommandHookSpec) -> CommandHook {
        CommandHook { spec }
    }
}

/// How a command hook's stdout may block a call although it exited with `0`.
#[derive(Deserialize)]
struct CommandAnswer {
    decision: Option<String>,
    reason: Option<String>,
}

impl Hook for CommandHook {
    fn name(&self) -> &str {
        &self.spec.name
    }

    fn applies_to(&self, tool: &str) -> bool {
        self.spec.tools.is_empty() || self.spec.tools.iter().any(|p| glob_match(p, tool))
    }

    fn before_call(&self, event: &HookEvent) -> Result<HookVerdict, HookError> {
        let (program, args) = self
            .spec
            .command
            .split_first()
            .ok_or_else(|| HookError("its command is empty".to_owned()))?;
        let input = serde_json::to_vec(event).map_err(|e| HookError(e.to_string()))?;
        let mut command = Command::new(program);
        command
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(cwd) = &self.spec.cwd {
            command.current_dir(cwd);
        }
        let run = run_with_timeout(command, &input, Duration::from_secs(self.spec.timeout))?;
        match run.status {
            Some(0) => {
                let text = String::from_utf8_lossy(&run.stdout);
                if text.trim().is_empty() {
                    return Ok(HookVerdict::Continue);
                }
                let answer: CommandAnswer = serde_json::from_str(text.trim()).map_err(|e| {
                    HookError(format!("its output is not the expected JSON answer: {e}"))
                })?;
                match answer.decision.as_deref() {
                    None | Some("continue" | "allow") => Ok(HookVerdict::Continue),
                    Some("block") => Ok(HookVerdict::Block(
                        answer
                            .reason
                            .unwrap_or_else(|| "no reason given".to_owned()),
                    )),
                    Some(other) => Err(HookError(format!(
                        "its answer `{other}` is neither `continue` nor `block`"
                    ))),
                }
            }
            Some(2) => {
                let reason = String::from_utf8_lossy(&run.stderr).trim().to_owned();
                Ok(HookVerdict::Block(if reason.is_empty() {
                    "no reason given".to_owned()
                } else {
                    reason
                }))
            }
            Some(code) => Err(HookError(format!("it exited with status {code}"))),
            None => Err(HookError("it was killed by a signal".to_owned())),
        }
    }
}

/// What a finished hook program left.
struct Finished {
    status: Option<i32>,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

/// Largest stdout or stderr kept from a hook program.
const MAX_HOOK_OUTPUT: u64 = 64 * 1024;

fn run_with_timeout(
    mut command: Command,
    input: &[u8],
    timeout: Duration,
) -> Result<Finished, HookError> {
    let mut child = command
        .spawn()
        .map_err(|e| HookError(format!("it could not start: {e}")))?;
    let mut stdin = child.stdin.take();
    let input = input.to_vec();
    // The writer, and the readers below, run on their own threads so a program that neither
    // reads its input nor exits cannot stall the call past its timeout.
    let writer = std::thread::spawn(move || {
        if let Some(stdin) = stdin.as_mut() {
            // A program that exits without reading its input is not an error here.
            let _ = stdin.write_all(&input);
        }
    });
    let reader = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut out = Vec::new();
            if let Some(pipe) = pipe {
                let _ = pipe.take(MAX_HOOK_OUTPUT).read_to_end(&mut out);
            }
            out
        })
    };
    let stdout = reader(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = reader(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() >= timeout => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(HookError(format!(
                    "it did not answer within {} s",
                    timeout.as_secs()
                )));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(e) => return Err(HookError(format!("waiting for it failed: {e}"))),
        }
    };
    let _ = writer.join();
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    Ok(Finished {
        status: status.code(),
        stdout,
        stderr,
    })
}

/// Whether `text` matches `pattern`, where `*` matches any run of characters.
fn glob_match(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let Some(first) = parts.next() else {
        return text.is_empty();
    };
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        // No `*`: the whole text must equal the pattern.
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// Runs `hook` on `event`, turning a panic into a failure (a panicking hook blocks the call).
pub(crate) fn run_hook(hook: &dyn Hook, event: &HookEvent) -> Result<HookVerdict, HookError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hook.before_call(event)))
        .unwrap_or_else(|_| Err(HookError("it panicked".to_owned())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_patterns() {
        let cases = [
            ("*", "a.b", true),
            ("group-admin.*", "group-admin.kick", true),
            ("group-admin.*", "notes.add", false),
            ("*.kick_member", "qq.kick_member", true),
            ("*kick*", "qq.group_kick", true),
            ("notes.add", "notes.add", true),
            ("notes.add", "notes.addx", false),
            ("a*b*c", "axxbyyc", true),
            ("a*b*c", "axxcyyb", false),
            ("a*a", "a", false),
        ];
        for (pattern, text, expected) in cases {
            assert_eq!(glob_match(pattern, text), expected, "{pattern} ~ {text}");
        }
    }
}
