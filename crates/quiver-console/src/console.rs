//! [`Console`]: what the console serves from (the operator's door to the state, the catalog)
//! and its login.

use std::io::Read;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use quiver_runtime::Runtime;
use quiver_runtime::admin::Admin;

use crate::auth::Auth;

/// How the console is set up.
#[derive(Debug, Clone)]
pub struct ConsoleConfig {
    /// The login token (also the bearer token of scripts).
    pub token: String,
    /// How long a queued call waits for its answer (the MCP front's `approval_wait`): a card
    /// older than this is expired.
    pub approval_wait: Duration,
    /// Further `name:port` values of `Host` the console answers to (behind a proxy).
    pub extra_hosts: Vec<String>,
    /// Who the holder of the token is when a workflow run asks a person: the local owner
    /// (the MCP front's stdio principal), so a run's separation of duties sees one person
    /// whether they answer here or with `quiver approvals`.
    pub owner: quiver_policy::Principal,
    /// Package authoring (`/drafts`): where drafts live and installs go. `None`: the pages
    /// say authoring is off.
    pub authoring: Option<Authoring>,
}

/// Where the console's package authoring works: drafts under `<state_dir>/drafts/`, installs
/// into the state folder's package store (as `quiver install` does), then `after_install`.
#[derive(Clone)]
pub struct Authoring {
    /// Quiver's state folder.
    pub state_dir: PathBuf,
    /// Called after a package was installed (the host asks its serving processes to reload,
    /// as `quiver install` does).
    pub after_install: Arc<dyn Fn() + Send + Sync>,
}

impl std::fmt::Debug for Authoring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authoring")
            .field("state_dir", &self.state_dir)
            .finish_non_exhaustive()
    }
}

impl ConsoleConfig {
    /// A console signed into with `token`, whose queued calls wait `approval_wait`.
    pub fn new(token: String, approval_wait: Duration) -> ConsoleConfig {
        ConsoleConfig {
            token,
            approval_wait,
            extra_hosts: Vec::new(),
            owner: quiver_policy::Principal::user("local", quiver_package::rules::Role::Master),
            authoring: None,
        }
    }
}

/// The console's state: the operator's door, the runtime (for the catalog) and its login.
pub struct Console {
    pub(crate) admin: Admin,
    pub(crate) runtime: Option<Arc<Runtime>>,
    pub(crate) auth: Auth,
    pub(crate) secret: Vec<u8>,
    pub(crate) config: ConsoleConfig,
    /// The runtime session of each package page's bridge, by sign-in and package.
    pub(crate) bridge_sessions: crate::pages::bridge::BridgeSessions,
}

impl Console {
    /// A console over `admin` (and `runtime`'s catalog, when there is one).
    pub fn new(admin: Admin, runtime: Option<Arc<Runtime>>, config: ConsoleConfig) -> Console {
        let secret = random_bytes().unwrap_or_else(|_| config.token.as_bytes().to_vec());
        Console {
            admin,
            runtime,
            auth: Auth::new(config.token.clone(), secret.clone()),
            secret,
            config,
            bridge_sessions: Default::default(),
        }
    }
}

/// 32 random bytes from the system.
pub(crate) fn random_bytes() -> std::io::Result<Vec<u8>> {
    let mut bytes = vec![0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes)
}

/// A fresh random token (`qc_` and 32 random bytes, URL-safe base64).
pub fn new_token() -> std::io::Result<String> {
    Ok(format!("qc_{}", URL_SAFE_NO_PAD.encode(random_bytes()?)))
}

/// The link that signs a browser in to the console at `local` with `token`.
pub fn login_url(local: SocketAddr, token: &str) -> String {
    let host = if local.ip().is_unspecified() {
        format!("127.0.0.1:{}", local.port())
    } else {
        local.to_string()
    };
    format!("http://{host}/login?token={token}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn login_links() {
        let cases = [
            ("127.0.0.1:8932", "http://127.0.0.1:8932/login?token=t"),
            ("0.0.0.0:80", "http://127.0.0.1:80/login?token=t"),
            ("[::1]:9", "http://[::1]:9/login?token=t"),
        ];
        for (addr, want) in cases {
            let addr: SocketAddr = addr.parse().unwrap_or_else(|_| unreachable!());
            assert_eq!(login_url(addr, "t"), want);
        }
    }
}
