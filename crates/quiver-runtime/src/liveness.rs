//! Which process recorded something, and whether it is still running: a call recorded as
//! started by a process that is gone was interrupted (killed, crashed, the machine stopped).
//! A process is named by its pid and its start time (field 22 of `/proc/<pid>/stat`), so a
//! pid reused by a later process is not mistaken for the one that recorded.

use serde_json::{Value, json};

/// This process, as recorded: `{"pid": ..., "start": ...}`.
pub fn this_process() -> Value {
    let pid = std::process::id();
    json!({"pid": pid, "start": start_time(pid)})
}

/// Whether the process `recorded` (as [`this_process`] wrote it) is still running. A record
/// without a pid belongs to no live process.
pub fn is_alive(recorded: &Value) -> bool {
    let Some(pid) = recorded
        .get("pid")
        .and_then(Value::as_u64)
        .and_then(|p| u32::try_from(p).ok())
    else {
        return false;
    };
    match (
        start_time(pid),
        recorded.get("start").and_then(Value::as_u64),
    ) {
        (Some(now), Some(then)) => now == then,
        (Some(_), None) => true,
        (None, _) => false,
    }
}

/// The start time of process `pid` in clock ticks after boot, if it is running.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_start_time(&stat)
}

/// Field 22 of a `/proc/<pid>/stat` line; the command name (field 2) may hold spaces and
/// parentheses, so fields are counted after its last `)`.
fn parse_start_time(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_times_are_read_after_the_command_name() {
        let cases = [
            (
                "1 (init) S 0 1 1 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 42 1000 10",
                Some(42),
            ),
            (
                "7 (a) b (c)) R 0 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 99 1 1",
                Some(99),
            ),
            ("garbage", None),
            ("3 (x) S 1 2", None),
        ];
        for (line, want) in cases {
            assert_eq!(parse_start_time(line), want, "{line}");
        }
    }

    #[test]
    fn this_process_is_alive_and_a_gone_one_is_not() {
        assert!(is_alive(&this_process()));
        assert!(!is_alive(&json!({"pid": u32::MAX - 1, "start": 1})));
        let mut reused = this_process();
        reused["start"] = json!(1);
        assert!(!is_alive(&reused));
        assert!(!is_alive(&json!({})));
    }
}
