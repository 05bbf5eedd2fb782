//! Live updates: a task looks at the pending cards, the control plane and the audit log and
//! sends a hint when one changed; each tab holds one Server-Sent Events stream of hints and
//! re-fetches its fragment after one. Streams end when the console shuts down.
//!
//! The task looks when the store hears a change ([`Admin::changes`]: a card created or
//! answered, a switch set, a run woken, a catalog reloaded, an audit record of this process; on
//! PostgreSQL from every instance through this one's `LISTEN` connection), and every [`POLL`]
//! besides, the safety net for a notification lost and for audit records other instances
//! wrote. A card created on one instance thus shows on another's console within milliseconds,
//! and no instance reads the database more than about once a second while nothing happens.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use quiver_runtime::admin::Admin;
use quiver_store::{ChangeKind, Heard};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::server::Ctx;

/// How often the watcher looks at the state when it hears nothing.
const POLL: Duration = Duration::from_secs(1);

/// The watcher looks at most this often, however many changes it hears (a busy instance
/// appends audit records all the time).
const GAP: Duration = Duration::from_millis(100);

/// The hints sent to the open tabs: `approvals`, `control` or `audit`.
#[derive(Clone)]
pub(crate) struct Hints {
    sender: broadcast::Sender<&'static str>,
}

/// What the watcher compares between two looks.
#[derive(Debug, Default, PartialEq, Eq)]
struct Seen {
    pending: Vec<String>,
    control: String,
    newest_audit: Option<i64>,
}

fn look(admin: &Admin) -> Option<Seen> {
    let pending = admin
        .pending_approvals(None)
        .ok()?
        .into_iter()
        .map(|a| a.card.id)
        .collect();
    let control = quiver_runtime::operator::control_name(admin.switches().ok()?.control).to_owned();
    let newest_audit = admin
        .audit(&quiver_store::AuditQuery {
            limit: Some(1),
            ..quiver_store::AuditQuery::default()
        })
        .ok()?
        .first()
        .map(|r| r.id);
    Some(Seen {
        pending,
        control,
        newest_audit,
    })
}

impl Hints {
    /// Starts the watcher over `admin`, until `shutdown`. Its first look is taken now, so
    /// every change after the console starts sends a hint.
    pub fn start(admin: Admin, shutdown: CancellationToken) -> Hints {
        let (sender, _) = broadcast::channel(64);
        let hints = Hints { sender };
        let send = hints.sender.clone();
        // Subscribed before the first look: nothing that changes after it goes unheard.
        let mut changes = admin.changes();
        let first = look(&admin);
        tokio::spawn(async move {
            let mut seen: Option<Seen> = first;
            let mut looked = tokio::time::Instant::now();
            loop {
                // The hints sent at once since the last look, which it does not send again (a
                // tab re-fetching twice may undo what its person just did on the page).
                let mut hinted = Vec::new();
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    heard = changes.next() => {
                        // The kinds a tab shows are hinted even when the look finds the same
                        // state (a card created and answered between two looks).
                        for hint in heard.iter().filter_map(hint_for) {
                            if !hinted.contains(&hint) {
                                let _ = send.send(hint);
                                hinted.push(hint);
                            }
                        }
                        tokio::select! {
                            () = shutdown.cancelled() => break,
                            () = tokio::time::sleep_until(looked + GAP) => {}
                        }
                    }
                    () = tokio::time::sleep(POLL) => {}
                }
                looked = tokio::time::Instant::now();
                let admin = admin.clone();
                let Ok(Some(now)) = tokio::task::spawn_blocking(move || look(&admin)).await else {
                    continue;
                };
                if let Some(before) = &seen {
                    for hint in changed(before, &now, &hinted) {
                        let _ = send.send(hint);
                    }
                }
                seen = Some(now);
            }
        });
        hints
    }
}

/// The hints for what changed between two looks, but those in `hinted` (sent already).
fn changed(before: &Seen, now: &Seen, hinted: &[&'static str]) -> Vec<&'static str> {
    [
        ("approvals", before.pending != now.pending),
        ("control", before.control != now.control),
        ("audit", before.newest_audit != now.newest_audit),
    ]
    .into_iter()
    .filter(|(hint, moved)| *moved && !hinted.contains(hint))
    .map(|(hint, _)| hint)
    .collect()
}

/// The hint a change sends at once, before the look: approvals and switches, which a tab
/// shows; the others are hinted when the look finds its state changed.
fn hint_for(heard: &Heard) -> Option<&'static str> {
    match heard {
        Heard::Change(change) => match change.kind {
            ChangeKind::Approval => Some("approvals"),
            ChangeKind::Control => Some("control"),
            ChangeKind::Run | ChangeKind::Event | ChangeKind::Catalog | ChangeKind::Audit => None,
        },
        Heard::Resync => None,
    }
}

/// `GET /events`: the tab's stream of hints.
pub(crate) async fn stream(
    State(ctx): State<Ctx>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let receiver = ctx.hints.sender.subscribe();
    let shutdown = ctx.shutdown.clone();
    let events = futures_util::stream::unfold(
        (receiver, shutdown),
        |(mut receiver, shutdown)| async move {
            let hint = tokio::select! {
                () = shutdown.cancelled() => return None,
                hint = receiver.recv() => match hint {
                    Ok(hint) => hint,
                    // Missed hints: refreshing the approvals covers them.
                    Err(broadcast::error::RecvError::Lagged(_)) => "approvals",
                    Err(broadcast::error::RecvError::Closed) => return None,
                },
            };
            Some((
                Ok(Event::default().event(hint).data(hint)),
                (receiver, shutdown),
            ))
        },
    );
    Sse::new(events).keep_alive(KeepAlive::default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use quiver_store::Change;

    #[test]
    fn the_hints_a_change_sends_at_once() {
        let cases = [
            (ChangeKind::Approval, Some("approvals")),
            (ChangeKind::Control, Some("control")),
            (ChangeKind::Run, None),
            (ChangeKind::Event, None),
            (ChangeKind::Catalog, None),
            (ChangeKind::Audit, None),
        ];
        for (kind, want) in cases {
            assert_eq!(
                hint_for(&Heard::Change(Change::new(kind, "x"))),
                want,
                "{kind:?}"
            );
        }
        assert_eq!(hint_for(&Heard::Resync), None);
    }

    #[test]
    fn a_look_hints_what_moved_and_was_not_hinted_already() {
        let seen = |pending: &[&str], control: &str, audit: Option<i64>| Seen {
            pending: pending.iter().map(|p| (*p).to_owned()).collect(),
            control: control.to_owned(),
            newest_audit: audit,
        };
        let base = seen(&["a"], "normal", Some(1));
        let cases: [(Seen, &[&'static str], &[&'static str]); 6] = [
            (seen(&["a"], "normal", Some(1)), &[], &[]),
            (seen(&["a", "b"], "normal", Some(1)), &[], &["approvals"]),
            (seen(&["a", "b"], "normal", Some(1)), &["approvals"], &[]),
            (
                seen(&[], "read_only", Some(2)),
                &[],
                &["approvals", "control", "audit"],
            ),
            (
                seen(&[], "read_only", Some(2)),
                &["control"],
                &["approvals", "audit"],
            ),
            (seen(&["a"], "normal", Some(2)), &["approvals"], &["audit"]),
        ];
        for (now, hinted, want) in cases {
            assert_eq!(changed(&base, &now, hinted), want, "{now:?} {hinted:?}");
        }
    }
}
