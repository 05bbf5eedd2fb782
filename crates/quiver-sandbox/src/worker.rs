//! `worker` tools: one long-lived sandboxed process per package speaking JSON lines.
//!
//! The runtime writes `{"id", "tool", "arguments", "context"}`; the worker answers
//! `{"id", "result"}` or `{"id", "error"}`, and may ask the user mid-call with
//! `{"id", "question"}`, to which the runtime replies `{"id", "answer"}` (a string, or `null`
//! with `"refused"` saying why nobody answered). Several calls may be in flight; a worker
//! that exits fails its pending calls, and the next call starts a new one.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::ChildStdin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::SandboxError;
use crate::sandbox::{Job, Sandbox, Spawned};

enum Reply {
    Result(Value),
    Error(String),
    Question(String),
    Exited(String),
}

type Pending = Arc<Mutex<HashMap<String, mpsc::Sender<Reply>>>>;

/// A running worker.
pub struct Worker {
    spawned: Mutex<Spawned>,
    stdin: Mutex<Option<ChildStdin>>,
    pending: Pending,
    alive: Arc<AtomicBool>,
    next: AtomicU64,
}

impl Worker {
    /// Starts `job` as a worker.
    pub fn start(sandbox: &Sandbox, job: &Job) -> Result<Worker, SandboxError> {
        let mut spawned = sandbox.spawn(job)?;
        let stdin = spawned.stdin.take();
        let stdout = spawned
            .stdout
            .take()
            .ok_or_else(|| SandboxError::Setup("the worker has no stdout".into()))?;
        let pending: Pending = Arc::new(Mutex::new(HashMap::new()));
        let alive = Arc::new(AtomicBool::new(true));
        let (p, a, tail) = (pending.clone(), alive.clone(), spawned.stderr_tail.clone());
        let limit = sandbox.config().stdout_limit as u64;
        std::thread::Builder::new()
            .name(format!("quiver-worker-{}", job.package))
            .spawn(move || read_replies(stdout, limit, &p, &a, &tail))
            .map_err(|e| SandboxError::Setup(format!("starting the worker reader: {e}")))?;
        Ok(Worker {
            spawned: Mutex::new(spawned),
            stdin: Mutex::new(stdin),
            pending,
            alive,
            next: AtomicU64::new(1),
        })
    }

    /// Whether the process is still running.
    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }

    /// Stops the worker and its whole process group.
    pub fn stop(&self) {
        self.alive.store(false, Ordering::SeqCst);
        if let Ok(mut spawned) = self.spawned.lock() {
            spawned.kill();
        }
    }

    fn send(&self, message: &Value) -> Result<(), SandboxError> {
        let mut stdin = self
            .stdin
            .lock()
            .map_err(|_| SandboxError::Failed("the worker's input is unusable".into()))?;
        let stdin = stdin
            .as_mut()
            .ok_or_else(|| SandboxError::Failed("the worker has no input".into()))?;
        let mut line = message.to_string();
        line.push('\n');
        stdin
            .write_all(line.as_bytes())
            .and_then(|()| stdin.flush())
            .map_err(|e| SandboxError::Failed(format!("the worker stopped reading: {e}")))
    }

    /// Runs one call of `tool`; `ask` answers the worker's questions (`None`: nobody can).
    pub fn call(
        &self,
        tool: &str,
        arguments: &Value,
        context: &Value,
        timeout: Duration,
        ask: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Value, SandboxError> {
        let id = format!("c{}", self.next.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = mpsc::channel();
        if let Ok(mut pending) = self.pending.lock() {
            pending.insert(id.clone(), tx);
        }
        if !self.is_alive() {
            self.forget(&id);
            return Err(SandboxError::Failed("the worker is not running".into()));
        }
        let sent =
            self.send(&json!({"id": id, "tool": tool, "arguments": arguments, "context": context}));
        if let Err(err) = sent {
            self.forget(&id);
            return Err(err);
        }
        let deadline = Instant::now() + timeout;
        let result = loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(remaining) {
                Ok(Reply::Result(value)) => break Ok(value),
                Ok(Reply::Error(message)) => break Err(SandboxError::Failed(message)),
                Ok(Reply::Exited(message)) => break Err(SandboxError::Failed(message)),
                Ok(Reply::Question(question)) => {
                    let reply = match ask(&question) {
                        Some(answer) => json!({"id": id, "answer": answer}),
                        None => {
                            json!({"id": id, "answer": null, "refused": "nobody can answer in this turn"})
                        }
                    };
                    if let Err(err) = self.send(&reply) {
                        break Err(err);
                    }
                }
                Err(_) => {
                    self.forget(&id);
                    self.stop();
                    return Err(SandboxError::TimedOut(timeout));
                }
            }
        };
        self.forget(&id);
        if let Some(denial) = self.spawned.lock().ok().and_then(|s| s.denial()) {
            return Err(SandboxError::Denied(denial));
        }
        result
    }

    fn forget(&self, id: &str) {
        if let Ok(mut pending) = self.pending.lock() {
            pending.remove(id);
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.stop();
    }
}

fn read_replies(
    stdout: impl Read,
    limit: u64,
    pending: &Pending,
    alive: &AtomicBool,
    tail: &Mutex<String>,
) {
    let mut reader = BufReader::new(stdout);
    let mut line = Vec::new();
    let why = loop {
        line.clear();
        match (&mut reader).take(limit + 1).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break "the worker exited".to_owned(),
            Ok(n) if n as u64 > limit => {
                break format!("the worker wrote a line longer than {limit} bytes and was stopped");
            }
            Ok(_) => {}
        }
        let Ok(message) = serde_json::from_slice::<Value>(&line) else {
            let shown = &line[..line.len().min(crate::output::STDERR_LINE)];
            tracing::warn!(target: "quiver_sandbox::tool", "a worker line ({} bytes) is not JSON: {}", line.len(), String::from_utf8_lossy(shown).trim_end());
            continue;
        };
        let Some(id) = message.get("id").and_then(Value::as_str) else {
            continue;
        };
        let reply = if let Some(q) = message.get("question") {
            Reply::Question(q.as_str().map_or_else(|| q.to_string(), str::to_owned))
        } else if let Some(e) = message.get("error") {
            Reply::Error(e.as_str().map_or_else(|| e.to_string(), str::to_owned))
        } else {
            Reply::Result(message.get("result").cloned().unwrap_or(Value::Null))
        };
        if let Some(tx) = pending.lock().ok().and_then(|p| p.get(id).cloned()) {
            let _ = tx.send(reply);
        }
    };
    alive.store(false, Ordering::SeqCst);
    // Let the stderr logger catch up, so the message carries the worker's last words.
    std::thread::sleep(Duration::from_millis(50));
    let last = tail
        .lock()
        .map(|t| {
            t.lines()
                .rev()
                .take(3)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join(" | ")
        })
        .unwrap_or_default();
    let message = if last.is_empty() {
        format!("{why}; its pending calls failed and the next call restarts it")
    } else {
        format!("{why} ({last}); its pending calls failed and the next call restarts it")
    };
    if let Ok(mut pending) = pending.lock() {
        for (_, tx) in pending.drain() {
            let _ = tx.send(Reply::Exited(message.clone()));
        }
    }
}
