//! Wake-ups across processes: one `LISTEN` connection per store, outside the pool, on the
//! store's one channel. A writing transaction that changed something other processes should
//! look at sends `NOTIFY` with the change (`kind:id`, see [`crate::changes`]); PostgreSQL
//! delivers it on commit to every listener, this store's own included, which tells the store's
//! subscribers ([`Store::changes`](crate::Store::changes)) and wakes its
//! [`wait_approval`](crate::Store::wait_approval) callers. Latency only: everyone still polls,
//! so a notification lost while the connection was down costs at most a poll interval, and
//! after every (re)connection every subscriber hears [`Heard::Resync`] and reads again.

use std::future::poll_fn;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::GenericClient;
use tokio_postgres::{AsyncMessage, NoTls};

use super::ops::exec;
use crate::changes::{Change, ChangeKind, Heard, Hub};
use crate::error::Result;
use crate::notify::Notify;

/// How long the listener waits before connecting again after losing its connection.
const RECONNECT: Duration = Duration::from_secs(1);

/// The `application_name` of the listening connection (`pg_stat_activity` tells it apart).
pub(super) const APPLICATION: &str = "quiver-listen";

/// The channel of a store's changes: one per schema, so deployments sharing a database do
/// not wake each other.
pub(super) fn channel(schema: Option<&str>) -> String {
    match schema {
        Some(schema) => format!("quiver_changes_{schema}"),
        None => "quiver_changes".to_owned(),
    }
}

/// Sends `change` on `channel` from the transaction `c`: delivered when (and only if) it
/// commits.
pub(super) async fn notify<C: GenericClient>(c: &C, channel: &str, change: &Change) -> Result<()> {
    exec(
        c,
        "SELECT pg_notify($1, $2)",
        &[&channel, &change.payload()],
    )
    .await?;
    Ok(())
}

/// What the listener tells when it hears something.
pub(super) struct Listeners {
    /// The store's subscribers.
    pub(super) hub: Arc<Hub>,
    /// The store's approval waiters.
    pub(super) waiters: Arc<Notify>,
}

impl Listeners {
    fn tell(&self, heard: Heard) {
        // Approval waiters read their card again only when it may have moved.
        let cards = match &heard {
            Heard::Change(change) => change.kind == ChangeKind::Approval,
            Heard::Resync => true,
        };
        self.hub.publish(heard);
        if cards {
            self.waiters.bump();
        }
    }
}

/// Listens on `channel` until the store's runtime shuts down, telling `listeners` of every
/// notification, and a [`Heard::Resync`] after every (re)connection.
pub(super) async fn listen(config: tokio_postgres::Config, channel: String, listeners: Listeners) {
    loop {
        match config.connect(NoTls).await {
            Ok((client, mut connection)) => {
                let statement = format!("LISTEN {channel}");
                let mut subscribe = pin!(client.batch_execute(&statement));
                let mut subscribed = false;
                loop {
                    tokio::select! {
                        done = &mut subscribe, if !subscribed => {
                            if let Err(error) = done {
                                tracing::debug!(%error, "LISTEN failed");
                                break;
                            }
                            subscribed = true;
                            // Whatever changed while nobody listened is read again.
                            listeners.tell(Heard::Resync);
                        }
                        message = poll_fn(|cx| connection.poll_message(cx)) => match message {
                            Some(Ok(AsyncMessage::Notification(note))) => {
                                match Change::parse(note.payload()) {
                                    Some(change) => listeners.tell(Heard::Change(change)),
                                    // A newer version's kind: look at everything.
                                    None => listeners.tell(Heard::Resync),
                                }
                            }
                            Some(Ok(_)) => {}
                            Some(Err(error)) => {
                                tracing::debug!(%error, "the LISTEN connection failed");
                                break;
                            }
                            None => break,
                        }
                    }
                }
            }
            Err(error) => tracing::debug!(%error, "cannot open the LISTEN connection"),
        }
        tokio::time::sleep(RECONNECT).await;
    }
}
