//! `quiver reload` asks a running `quiver serve` to reload through two files in the state
//! folder, so no new network surface is opened: the command writes a fresh token to
//! `reload/request`; each serving process over that state folder looks at the file a few times a
//! second, reloads every package when the token changes (the same path a file change takes),
//! and writes `reload/answer-<pid>` with the token and what the new catalog holds.
//! Only someone who may write the state folder may ask, as for every other state.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The folder of the request and the answers.
const DIR: &str = "reload";
/// The request's file.
const REQUEST: &str = "request";
/// How often a serving process looks at the request.
pub(crate) const POLL: Duration = Duration::from_millis(250);

/// A serving process's answer to one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The serving process.
    pub pid: u32,
    /// Packages in the new catalog.
    pub packages: usize,
    /// Error diagnostics in it.
    pub errors: usize,
}

/// Asks the serving processes over `state_dir` to reload; the token their answers carry.
pub fn ask(state_dir: &Path) -> std::io::Result<String> {
    let dir = state_dir.join(DIR);
    std::fs::create_dir_all(&dir)?;
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let token = format!("{nanos}-{}", std::process::id());
    write_atomic(&dir.join(REQUEST), &token)?;
    Ok(token)
}

/// Waits up to `wait` for answers to `token`; returns those that came (none: no serving
/// process answered). Returns early once one answer came and no other for `settle`.
pub fn answers(state_dir: &Path, token: &str, wait: Duration, settle: Duration) -> Vec<Answer> {
    let started = Instant::now();
    let mut first: Option<Instant> = None;
    loop {
        let got = read_answers(state_dir, token);
        if !got.is_empty() {
            let at = *first.get_or_insert_with(Instant::now);
            if at.elapsed() >= settle {
                return got;
            }
        }
        if started.elapsed() >= wait {
            return got;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn read_answers(state_dir: &Path, token: &str) -> Vec<Answer> {
    let Ok(entries) = std::fs::read_dir(state_dir.join(DIR)) else {
        return Vec::new();
    };
    let mut out: Vec<Answer> = entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("answer-"))
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .filter_map(|text| parse_answer(&text, token))
        .collect();
    out.sort_by_key(|a| a.pid);
    out
}

/// `<token> <pid> <packages> <errors>`, when it answers `token`.
fn parse_answer(text: &str, token: &str) -> Option<Answer> {
    let mut words = text.split_whitespace();
    if words.next()? != token {
        return None;
    }
    let mut number = || words.next()?.parse::<usize>().ok();
    Some(Answer {
        pid: u32::try_from(number()?).ok()?,
        packages: number()?,
        errors: number()?,
    })
}

/// The serving side: the request last seen.
pub(crate) struct Requests {
    dir: PathBuf,
    seen: Option<String>,
}

impl Requests {
    /// Watches `state_dir`'s request; one already there when serving starts is not new.
    pub(crate) fn new(state_dir: &Path) -> Requests {
        let dir = state_dir.join(DIR);
        let seen = std::fs::read_to_string(dir.join(REQUEST)).ok();
        Requests { dir, seen }
    }

    /// A request token not seen before, if one came.
    pub(crate) fn poll(&mut self) -> Option<String> {
        let now = std::fs::read_to_string(self.dir.join(REQUEST)).ok()?;
        if self.seen.as_deref() == Some(now.as_str()) {
            return None;
        }
        self.seen = Some(now.clone());
        Some(now.trim().to_owned())
    }

    /// Answers `token` with what the new catalog holds.
    pub(crate) fn answer(&self, token: &str, packages: usize, errors: usize) {
        let pid = std::process::id();
        let text = format!("{token} {pid} {packages} {errors}\n");
        if let Err(error) = write_atomic(&self.dir.join(format!("answer-{pid}")), &text) {
            tracing::warn!(%error, "cannot answer `quiver reload`");
        }
    }
}

/// Writes `text` to `path` through a temporary file renamed over it.
fn write_atomic(path: &Path, text: &str) -> std::io::Result<()> {
    let mut temp = path.as_os_str().to_owned();
    temp.push(format!(".{}.part", std::process::id()));
    std::fs::write(&temp, text)?;
    std::fs::rename(&temp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_for_their_token_only() {
        let cases = [
            ("t1 42 7 0\n", Some((42, 7, 0))),
            ("t1 42 7 2", Some((42, 7, 2))),
            ("t0 42 7 0\n", None),
            ("t1 42 seven 0\n", None),
            ("t1 42\n", None),
            ("", None),
        ];
        for (text, want) in cases {
            let got = parse_answer(text, "t1").map(|a| (a.pid, a.packages, a.errors));
            assert_eq!(got, want, "{text:?}");
        }
    }

    /// A request is new once; one there before the server started is not.
    #[test]
    fn a_request_is_seen_once_and_answered() {
        let dir = tempfile::tempdir().unwrap();
        let stale = ask(dir.path()).unwrap();
        let mut requests = Requests::new(dir.path());
        assert_eq!(requests.poll(), None, "{stale} was there before");
        let token = ask(dir.path()).unwrap();
        assert_eq!(requests.poll().as_deref(), Some(token.as_str()));
        assert_eq!(requests.poll(), None);
        requests.answer(&token, 3, 1);
        let got = answers(dir.path(), &token, Duration::ZERO, Duration::ZERO);
        assert_eq!(
            got,
            [Answer {
                pid: std::process::id(),
                packages: 3,
                errors: 1
            }]
        );
        assert!(answers(dir.path(), &stale, Duration::ZERO, Duration::ZERO).is_empty());
    }
}
