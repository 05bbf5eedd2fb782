//! Wake-ups across processes: one `LISTEN` connection per store, outside the pool, on which
//! every approval resolved by any process on the database (its transaction sends
//! `NOTIFY` on commit) wakes this process's [`wait_approval`](crate::Store::wait_approval)
//! callers at once. Latency only: the waiters still poll, so a notification lost while the
//! connection was down costs at most a poll interval, and after every (re)connection the
//! waiters are woken to read again.

use std::future::poll_fn;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use tokio_postgres::{AsyncMessage, NoTls};

use crate::notify::Notify;

/// How long the listener waits before connecting again after losing its connection.
const RECONNECT: Duration = Duration::from_secs(1);

/// The channel of a store's approvals: one per schema, so deployments sharing a database do
/// not wake each other.
pub(super) fn channel(schema: Option<&str>) -> String {
    match schema {
        Some(schema) => format!("quiver_approvals_{schema}"),
        None => "quiver_approvals".to_owned(),
    }
}

/// Listens on `channel` until the store's runtime shuts down, bumping `notify` on every
/// notification and after every (re)connection.
pub(super) async fn listen(config: tokio_postgres::Config, channel: String, notify: Arc<Notify>) {
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
                            // Whatever was answered while nobody listened is read again.
                            notify.bump();
                        }
                        message = poll_fn(|cx| connection.poll_message(cx)) => match message {
                            Some(Ok(AsyncMessage::Notification(_))) => notify.bump(),
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
