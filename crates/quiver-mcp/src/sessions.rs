//! Who owns each 2025-11-25 HTTP session: a session id answers only the caller that created
//! it; idle sessions are forgotten, and their number is capped.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::front::Caller;

/// How long a session lasts without a request (rmcp closes it after the same time).
pub const SESSION_IDLE: Duration = Duration::from_secs(5 * 60);
/// How many sessions may be open at once.
pub const MAX_SESSIONS: usize = 256;

/// What the gate does with a request.
#[derive(Debug, PartialEq, Eq)]
pub enum Admit {
    /// Serve it.
    Pass,
    /// Its session id is unknown, expired or another caller's: answer "not found".
    Unknown,
    /// A new session would pass the cap.
    Full,
}

struct Owned {
    caller: Caller,
    seen: Instant,
}

/// The owners of open sessions.
pub struct Sessions {
    open: Mutex<HashMap<String, Owned>>,
    idle: Duration,
    cap: usize,
}

impl Default for Sessions {
    fn default() -> Self {
        Sessions::new(SESSION_IDLE, MAX_SESSIONS)
    }
}

impl Sessions {
    /// Sessions forgotten after `idle` without a request, at most `cap` at once.
    pub fn new(idle: Duration, cap: usize) -> Sessions {
        Sessions {
            open: Mutex::new(HashMap::new()),
            idle,
            cap,
        }
    }

    /// Checks a request that names `session` (or none; `initialize` starts one).
    pub fn admit(&self, session: Option<&str>, caller: &Caller, initialize: bool) -> Admit {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        open.retain(|_, owned| now.duration_since(owned.seen) < self.idle);
        match session {
            Some(id) => match open.get_mut(id) {
                Some(owned) if owned.caller == *caller => {
                    owned.seen = now;
                    Admit::Pass
                }
                _ => Admit::Unknown,
            },
            None if initialize && open.len() >= self.cap => Admit::Full,
            None => Admit::Pass,
        }
    }

    /// Records that `caller` created the session `id`.
    pub fn bind(&self, id: &str, caller: Caller) {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.insert(
            id.to_owned(),
            Owned {
                caller,
                seen: Instant::now(),
            },
        );
    }

    /// Forgets a session the client ended.
    pub fn end(&self, id: &str) {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.remove(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quiver_package::rules::Role;
    use quiver_policy::Principal;

    #[test]
    fn a_session_answers_its_creator_only() {
        let alice = Caller::local(Principal::user("alice", Role::User));
        let bob = Caller::local(Principal::user("bob", Role::User));
        let anonymous = Caller::local(Principal::anonymous());
        let sessions = Sessions::new(Duration::from_secs(60), 2);
        sessions.bind("s1", alice.clone());
        let cases = [
            (Some("s1"), &alice, false, Admit::Pass),
            (Some("s1"), &bob, false, Admit::Unknown),
            (Some("s1"), &anonymous, false, Admit::Unknown),
            (Some("nope"), &alice, false, Admit::Unknown),
            (None, &bob, true, Admit::Pass),
        ];
        for (id, caller, initialize, want) in cases {
            assert_eq!(sessions.admit(id, caller, initialize), want, "{id:?}");
        }
        sessions.bind("s2", bob.clone());
        assert_eq!(sessions.admit(None, &bob, true), Admit::Full);
        assert_eq!(sessions.admit(None, &bob, false), Admit::Pass);
        sessions.end("s2");
        assert_eq!(sessions.admit(None, &bob, true), Admit::Pass);
    }

    #[test]
    fn idle_sessions_are_forgotten() {
        let alice = Caller::local(Principal::user("alice", Role::User));
        let sessions = Sessions::new(Duration::from_millis(20), 1);
        sessions.bind("s1", alice.clone());
        assert_eq!(sessions.admit(None, &alice, true), Admit::Full);
        std::thread::sleep(Duration::from_millis(40));
        assert_eq!(sessions.admit(Some("s1"), &alice, false), Admit::Unknown);
        assert_eq!(sessions.admit(None, &alice, true), Admit::Pass);
    }
}
