//! A test-only crash switch: `QUIVER_TEST_CRASH_AT=<point>[:<n>]` makes the process kill itself
//! with SIGKILL right after the `n`-th time (default 1) the engine passes that commit point, so
//! tests can check what a restart recovers after `kill -9` at every commit of the order in
//! docs/workflows.md. The variable is read once; unset (every real use), a point is one load of
//! a `OnceLock`.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// The commit points, in the order a tool step passes them (`run_created` once per run).
const POINTS: &[&str] = &[
    "run_created",
    "attempt_started",
    "tool_exited",
    "result_committed",
    "step_committed",
    "wait_stored",
    "wait_resolved",
    "operator_committed",
    "question_asked",
];

/// Where the switch kills the process.
#[derive(Debug)]
struct Switch {
    point: String,
    nth: u64,
    seen: AtomicU64,
}

static SWITCH: OnceLock<Option<Switch>> = OnceLock::new();

/// The point and the count a switch names (`attempt_started:2`); `None` for an unknown point
/// or a count that is not a positive number.
fn parse(spec: &str) -> Option<(String, u64)> {
    let (point, nth) = match spec.split_once(':') {
        Some((point, n)) => (point, n.parse().ok().filter(|n| *n > 0)?),
        None => (spec, 1),
    };
    POINTS.contains(&point).then(|| (point.to_owned(), nth))
}

fn read() -> Option<Switch> {
    let spec = std::env::var("QUIVER_TEST_CRASH_AT").ok()?;
    let (point, nth) = parse(spec.trim())?;
    Some(Switch {
        point,
        nth,
        seen: AtomicU64::new(0),
    })
}

/// The engine (or the runtime's step runner) passed commit point `name`: kills the process
/// with SIGKILL if the switch names it and this is its `n`-th time.
pub fn point(name: &str) {
    let Some(switch) = SWITCH.get_or_init(read) else {
        return;
    };
    if switch.point == name && switch.seen.fetch_add(1, Ordering::SeqCst) + 1 == switch.nth {
        let _ =
            rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
        // SIGKILL cannot be caught; should the kill fail, die without unwinding all the same.
        std::process::abort();
    }
}

/// The engine committed `advance`: the point `wait_stored` when it stored a wait (an approval,
/// a timer, a retry's pause, a parked call), else `name`.
pub(crate) fn committed(advance: &quiver_store::workflow::Advance, name: &str) {
    point(if advance.wait.is_some() {
        "wait_stored"
    } else {
        name
    });
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn specs() {
        let cases: &[(&str, Option<(&str, u64)>)] = &[
            ("attempt_started", Some(("attempt_started", 1))),
            ("tool_exited:3", Some(("tool_exited", 3))),
            ("wait_stored:1", Some(("wait_stored", 1))),
            ("tool_exited:0", None),
            ("tool_exited:x", None),
            ("tool_exited:", None),
            ("nowhere", None),
            ("", None),
        ];
        for (spec, want) in cases {
            let got = parse(spec);
            assert_eq!(got.as_ref().map(|(p, n)| (p.as_str(), *n)), *want, "{spec}");
        }
    }
}
