//! `quiver serve`: the MCP front over stdio or Streamable HTTP (with webhooks beside it),
//! the web console on its own port (docs/console.md), and the workflow scheduler
//! (schedules, events, timers, resumed runs) while it serves.

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use quiver_host::reload::watch::WatchOptions;
use quiver_host::{Host, HostOptions, McpFront, Serving};
use quiver_mcp::Front;
use quiver_runtime::ApproverSet;
use tokio_util::sync::CancellationToken;

use crate::cmd::runtime::StateArgs;
use crate::roots::RootArgs;

/// The address `quiver serve` listens on when it serves HTTP without `--http`.
pub const DEFAULT_HTTP: &str = "127.0.0.1:8931";

/// Threads of the workflow scheduler that drive runs.
const SCHEDULER_WORKERS: usize = 4;

/// Arguments of `quiver serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Serve one client over stdin and stdout (how Claude Code, Codex and Cursor start a
    /// local server).
    #[arg(long, conflicts_with = "http")]
    pub stdio: bool,
    /// Serve Streamable HTTP at `ADDR` (`127.0.0.1:8931`); the endpoint is `/mcp`.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<SocketAddr>,
    /// Serve HTTP requests without a bearer token, as an anonymous user (never the owner,
    /// never answering an approval only a person may give). Without it, HTTP needs a token:
    /// the owner's, made at the first start and kept in the state folder's `mcp-token`.
    #[arg(long)]
    pub allow_anonymous: bool,
    /// Serve the web console at `ADDR` (default `127.0.0.1:8932` when serving HTTP; over
    /// stdio only when given). A login link with a fresh token is printed at each start.
    #[arg(long, value_name = "ADDR")]
    pub console: Option<SocketAddr>,
    /// Do not serve the web console.
    #[arg(long, conflicts_with = "console")]
    pub no_console: bool,
    #[command(flatten)]
    pub state: StateArgs,
}

/// The example packages of this checkout, served when nothing else is configured.
fn examples_dir() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/packages");
    dir.is_dir().then(|| dir.canonicalize().unwrap_or(dir))
}

/// The roots: `--root`, `QUIVER_PATH` or the config file as for every command; with none of
/// them and no package installed (`quiver install`), the bundled example packages.
fn roots(args: &RootArgs, config: &quiver_host::Config) -> RootArgs {
    if args.roots.is_empty()
        && std::env::var_os("QUIVER_PATH").is_none()
        && config.path.is_none()
        && nothing_installed()
        && let Some(examples) = examples_dir()
    {
        return RootArgs {
            roots: vec![examples],
        };
    }
    args.clone()
}

/// Whether `quiver install` has installed nothing in the state folder.
fn nothing_installed() -> bool {
    quiver_host::paths::state_dir().is_none_or(|state| {
        quiver_install::store::Store::new(&state)
            .installed()
            .map_or(true, |i| i.packages.is_empty())
    })
}

/// Runs `quiver serve` until the client disconnects (stdio) or Ctrl-C.
pub fn run(root_args: &RootArgs, args: ServeArgs) -> miette::Result<ExitCode> {
    let config = crate::roots::config()?;
    let roots = roots(root_args, &config);
    let search = crate::roots::search_models(&config);
    let state = args.state.state_with(&config)?;
    let db = state.path.clone();
    let where_state = state.describe();
    let stdio = args.stdio || (args.http.is_none() && !std::io::stdin().is_terminal());
    let McpFront {
        config: mut mcp,
        owner_token,
    } = quiver_host::mcp_front(
        &config,
        &db,
        Serving {
            stdio,
            allow_anonymous: args.allow_anonymous,
        },
    )
    .map_err(crate::roots::fail)?;
    // The person is the client (elicitation), set per call; the console queue answers what
    // the policy routes to an operator.
    let approvers = ApproverSet {
        person: None,
        console: Some(state.console_approver(mcp.approval_wait)),
        reviewer: None,
    };
    // The console binds before the MCP front is made, so the front can link to it.
    // The default port taken (another `quiver serve`): a free loopback port instead, printed
    // with the login link; an address given with `--console` must be free.
    let console_addr = match (args.console, args.no_console, stdio) {
        (_, true, _) | (None, false, true) => None,
        (Some(addr), false, _) => Some((addr, false)),
        (None, false, false) => Some((
            quiver_console::DEFAULT_ADDR
                .parse()
                .unwrap_or(SocketAddr::from(([127, 0, 0, 1], 8932))),
            true,
        )),
    };
    let console_listener = console_addr
        .map(|(addr, default)| {
            let listener = match std::net::TcpListener::bind(addr) {
                Ok(listener) => listener,
                Err(e) if default && e.kind() == std::io::ErrorKind::AddrInUse => {
                    std::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
                        .map_err(|e| miette::miette!("cannot listen for the console: {e}"))?
                }
                Err(e) => {
                    return Err(miette::miette!(
                        "cannot listen on {addr} for the console: {e}"
                    ));
                }
            };
            listener
                .set_nonblocking(true)
                .map_err(|e| miette::miette!("{e}"))?;
            let local = listener.local_addr().map_err(|e| miette::miette!("{e}"))?;
            // No sandboxed tool is ever proxied to the console, whatever it declares.
            quiver_sandbox::proxy::register_own_listener(local);
            mcp.console_url = Some(console_base(local));
            Ok((listener, local))
        })
        .transpose()?;
    let approval_wait = mcp.approval_wait;
    let loading = crate::progress::Progress::loading();
    let mut host = Host::open(
        config,
        HostOptions {
            roots: roots.roots.clone(),
            state,
            search: Some(search),
            approvers,
            launcher: crate::roots::launcher()?,
            reload: true,
        },
    )
    .map_err(crate::roots::fail)?;
    drop(loading);
    crate::roots::notices(host.notices());
    // Edits of the project and user roots are reloaded while serving, unless the config
    // file's `reload.watch` is `false` (`quiver reload` works either way).
    let reload = host.config().reload;
    if reload.watch {
        let options = WatchOptions {
            force_polling: reload.polling,
            ..WatchOptions::default()
        };
        if let Err(e) = host.watch_roots(options) {
            crate::err(&format!(
                "warning: edits of the packages are not followed: {e}"
            ));
        }
    }
    let loaded = crate::roots::loaded(&host.runtime().catalog(), &roots.roots);
    // Workflow `agent` steps and exposed agents run on the configured models.
    if let Err(e) = host.run_agents_with_configured_models() {
        tracing::warn!("agents cannot run: {e}");
    }
    // Schedules fire, events start workflows, timers wake and interrupted runs resume while
    // the front serves.
    let scheduler = host
        .start_scheduler(SCHEDULER_WORKERS)
        .map_err(crate::roots::fail)?;
    let secret = host.mcp_secret().map_err(crate::roots::fail)?;
    let front = Arc::new(Front::new(host.runtime().clone(), mcp, secret));
    // Clients hear when the skills they see changed with a reload.
    let told = front.clone();
    host.on_catalog_swap(Arc::new(move |_| told.catalog_swapped()));
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| miette::miette!("cannot start the async runtime: {e}"))?;
    let shutdown = CancellationToken::new();
    let console = console_listener
        .map(|(listener, local)| {
            let (console, token) = host
                .console(approval_wait, front.config().stdio_principal.clone())
                .map_err(crate::roots::fail)?;
            let login = quiver_console::login_url(local, &token);
            let console = Arc::new(console);
            Ok::<_, miette::Report>((console, listener, local, login))
        })
        .transpose()?;
    tokio.block_on(async move {
        let console_task = match console {
            Some((console, listener, local, login)) => {
                let listener = tokio::net::TcpListener::from_std(listener)
                    .map_err(|e| miette::miette!("{e}"))?;
                crate::err(&format!(
                    "quiver: console at {}; sign in with this link (a new one at each start):\n  {login}",
                    console_base(local)
                ));
                let stop = shutdown.clone();
                Some(tokio::spawn(async move {
                    if let Err(e) = quiver_console::serve(console, listener, stop).await {
                        tracing::warn!("the console stopped: {e}");
                    }
                }))
            }
            None => None,
        };
        let served = serve_mcp(stdio, front, shutdown.clone(), args.http, owner_token, &where_state, &loaded).await;
        // The console ends with the front (stdio: the client left).
        shutdown.cancel();
        if let Some(task) = console_task {
            let _ = task.await;
        }
        served
    })?;
    scheduler.stop();
    drop(host);
    Ok(ExitCode::SUCCESS)
}

/// The console's base URL for a listener on `local`.
fn console_base(local: SocketAddr) -> String {
    quiver_console::login_url(local, "")
        .trim_end_matches("/login?token=")
        .to_owned()
}

/// Serves the MCP front over stdio or HTTP until the client leaves or `shutdown`.
async fn serve_mcp(
    stdio: bool,
    front: Arc<Front>,
    shutdown: CancellationToken,
    http: Option<SocketAddr>,
    owner_token: Option<quiver_mcp::owner_token::OwnerToken>,
    where_state: &str,
    loaded: &str,
) -> miette::Result<()> {
    let on_signal = shutdown.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_signal.cancel();
        }
    });
    if stdio {
        crate::err(&format!(
            "quiver: MCP over stdio (packages: {loaded}; state: {where_state})"
        ));
        quiver_mcp::serve_stdio(front, (tokio::io::stdin(), tokio::io::stdout()), shutdown)
            .await
            .map_err(|e| miette::miette!("{e}"))
    } else {
        let addr = http.unwrap_or_else(|| {
            DEFAULT_HTTP
                .parse()
                .unwrap_or(SocketAddr::from(([127, 0, 0, 1], 8931)))
        });
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| miette::miette!("cannot listen on {addr}: {e}"))?;
        let local = listener.local_addr().map_err(|e| miette::miette!("{e}"))?;
        // No sandboxed tool is ever proxied to this front, whatever it declares.
        quiver_sandbox::proxy::register_own_listener(local);
        if !local.ip().is_loopback() && front.config().allow_anonymous {
            crate::err(&format!(
                "warning: serving on {local}, reachable from other machines, to anonymous callers (--allow-anonymous)"
            ));
        }
        crate::err(&format!(
            "quiver: MCP over Streamable HTTP at http://{local}{}, webhooks at http://{local}/hooks/<package>/<name> (packages: {loaded}; state: {where_state}); Ctrl-C stops",
            quiver_mcp::http::MCP_PATH,
        ));
        if let Some(token) = owner_token.filter(|t| t.created) {
            let url = format!("http://{local}{}", quiver_mcp::http::MCP_PATH);
            crate::err(&format!(
                "quiver: made the owner's bearer token, kept in `{}` (shown this once); paste into your MCP client:\n{}",
                token.path.display(),
                quiver_mcp::owner_token::client_config(&url, &token.token)
            ));
        }
        quiver_mcp::serve_http(front, listener, shutdown)
            .await
            .map_err(|e| miette::miette!("{e}"))
    }
}
