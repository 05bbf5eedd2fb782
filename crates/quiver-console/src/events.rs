//! Live updates: a task watches the pending cards, the control plane and the audit log and
//! sends a hint when one changes; each tab holds one Server-Sent Events stream of hints and re-fetches
//! its fragment after one. Streams end when the console shuts down.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use quiver_runtime::admin::Admin;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::server::Ctx;

/// How often the watcher looks at the state.
const POLL: Duration = Duration::from_millis(100);

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
        let first = look(&admin);
        tokio::spawn(async move {
            let mut seen: Option<Seen> = first;
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    () = tokio::time::sleep(POLL) => {}
                }
                let admin = admin.clone();
                let Ok(Some(now)) = tokio::task::spawn_blocking(move || look(&admin)).await else {
                    continue;
                };
                if let Some(before) = &seen {
                    if before.pending != now.pending {
                        let _ = send.send("approvals");
                    }
                    if before.control != now.control {
                        let _ = send.send("control");
                    }
                    if before.newest_audit != now.newest_audit {
                        let _ = send.send("audit");
                    }
                }
                seen = Some(now);
            }
        });
        hints
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
