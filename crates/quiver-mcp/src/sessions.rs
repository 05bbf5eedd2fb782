//! Who owns each 2025-11-25 HTTP session: a session id answers only the caller that created
//! it; idle sessions are forgotten, and their number is capped per principal, with room kept
//! for the owner, so no one caller can lock the others out.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use quiver_package::rules::Role;

use crate::front::Caller;

/// How long a session lasts without a request (rmcp closes it after the same time).
pub const SESSION_IDLE: Duration = Duration::from_secs(5 * 60);
/// How many sessions may be open at once, for every caller together.
pub const MAX_SESSIONS: usize = 256;
/// How many sessions one principal (one user id; every anonymous caller together) may hold.
pub const MAX_SESSIONS_PER_PRINCIPAL: usize = 32;
/// How many of [`MAX_SESSIONS`] only the owner (role `master`) may open.
pub const OWNER_RESERVE: usize = 32;

/// What the gate does with a request.
#[derive(Debug, PartialEq, Eq)]
pub enum Admit {
    /// Serve it.
    Pass,
    /// Its session id is unknown, expired or another caller's: answer "not found".
    Unknown,
    /// A new session would pass the caller's own limit.
    CallerFull,
    /// A new session would pass the limit of every caller together.
    Full,
}

/// The limits on open sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Every caller together.
    pub total: usize,
    /// One principal.
    pub per_principal: usize,
    /// Kept for the owner out of `total`.
    pub owner_reserve: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            total: MAX_SESSIONS,
            per_principal: MAX_SESSIONS_PER_PRINCIPAL,
            owner_reserve: OWNER_RESERVE,
        }
    }
}

struct Owned {
    caller: Caller,
    seen: Instant,
}

/// The owners of open sessions.
pub struct Sessions {
    open: Mutex<HashMap<String, Owned>>,
    idle: Duration,
    limits: Limits,
}

impl Default for Sessions {
    fn default() -> Self {
        Sessions::new(SESSION_IDLE, Limits::default())
    }
}

/// Whether `caller` is the owner, who alone may use the reserve and is held to no limit of
/// its own.
fn is_owner(caller: &Caller) -> bool {
    caller.principal.effective_role() == Some(Role::Master)
}

/// The principal whose sessions count together: its user id (anonymous callers are one).
fn same_principal(a: &Caller, b: &Caller) -> bool {
    a.principal.user_id == b.principal.user_id
}

impl Sessions {
    /// Sessions forgotten after `idle` without a request, open within `limits`.
    pub fn new(idle: Duration, limits: Limits) -> Sessions {
        Sessions {
            open: Mutex::new(HashMap::new()),
            idle,
            limits,
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
            None if initialize => self.room_for(&open, caller),
            None => Admit::Pass,
        }
    }

    /// Whether `caller` may open one more session beside the `open` ones.
    fn room_for(&self, open: &HashMap<String, Owned>, caller: &Caller) -> Admit {
        let limits = &self.limits;
        if is_owner(caller) {
            return if open.len() < limits.total {
                Admit::Pass
            } else {
                Admit::Full
            };
        }
        let own = open
            .values()
            .filter(|o| same_principal(&o.caller, caller))
            .count();
        let others = open.values().filter(|o| !is_owner(&o.caller)).count();
        if own >= limits.per_principal {
            Admit::CallerFull
        } else if others >= limits.total.saturating_sub(limits.owner_reserve) {
            Admit::Full
        } else {
            Admit::Pass
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
    use quiver_policy::Principal;

    fn limits(total: usize, per_principal: usize, owner_reserve: usize) -> Limits {
        Limits {
            total,
            per_principal,
            owner_reserve,
        }
    }

    #[test]
    fn a_session_answers_its_creator_only() {
        let alice = Caller::local(Principal::user("alice", Role::User));
        let bob = Caller::local(Principal::user("bob", Role::User));
        let anonymous = Caller::local(Principal::anonymous());
        let sessions = Sessions::new(Duration::from_secs(60), limits(2, 2, 0));
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

    /// (sessions already held: alice, bob, anonymous, owner), who asks, the answer; with at
    /// most 6 sessions, 2 per principal and 2 kept for the owner.
    #[test]
    fn limits_are_per_principal_with_room_for_the_owner() {
        let alice = Caller::local(Principal::user("alice", Role::User));
        let bob = Caller::local(Principal::user("bob", Role::Trusted));
        let anonymous = Caller::local(Principal::anonymous());
        let owner = Caller::local(Principal::user("local", Role::Master));
        type Held = (usize, usize, usize, usize);
        let cases: [(Held, &Caller, Admit); 10] = [
            ((0, 0, 0, 0), &alice, Admit::Pass),
            ((2, 0, 0, 0), &alice, Admit::CallerFull),
            ((2, 0, 0, 0), &bob, Admit::Pass),
            ((2, 0, 0, 0), &anonymous, Admit::Pass),
            ((0, 0, 2, 0), &anonymous, Admit::CallerFull),
            ((2, 2, 0, 0), &anonymous, Admit::Full),
            ((2, 2, 0, 0), &owner, Admit::Pass),
            ((2, 1, 0, 3), &bob, Admit::Pass),
            ((2, 2, 0, 2), &owner, Admit::Full),
            ((0, 0, 0, 5), &owner, Admit::Pass),
        ];
        for ((a, b, n, o), caller, want) in cases {
            let sessions = Sessions::new(Duration::from_secs(60), limits(6, 2, 2));
            let held = [(a, &alice), (b, &bob), (n, &anonymous), (o, &owner)];
            for (count, who) in held {
                for i in 0..count {
                    let id = format!("{:?}-{i}", who.principal.user_id);
                    sessions.bind(&id, who.clone());
                }
            }
            let asker = caller.principal.user_id.clone();
            assert_eq!(
                sessions.admit(None, caller, true),
                want,
                "{a} {b} {n} {o}, {asker:?}"
            );
        }
    }

    #[test]
    fn idle_sessions_are_forgotten() {
        let alice = Caller::local(Principal::user("alice", Role::User));
        let sessions = Sessions::new(Duration::from_millis(20), limits(1, 1, 0));
        sessions.bind("s1", alice.clone());
        assert_eq!(sessions.admit(None, &alice, true), Admit::CallerFull);
        std::thread::sleep(Duration::from_millis(40));
        assert_eq!(sessions.admit(Some("s1"), &alice, false), Admit::Unknown);
        assert_eq!(sessions.admit(None, &alice, true), Admit::Pass);
    }
}
