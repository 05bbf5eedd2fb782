//! The MCP front over Streamable HTTP on a real loopback socket: `serve_http` in process on
//! `127.0.0.1:0`, configured as `quiver serve --http` configures it (the host's `mcp_front`:
//! the owner's bearer token made in the state folder, no anonymous access), and rmcp's
//! streamable HTTP client presenting that token. Two clients: one of the 2025-11-25 era in an
//! `Mcp-Session-Id` session that marks its turns, and a generic one of the 2026-07-28 era
//! whose every request stands alone and passes back the conversation handle it was given
//! (`_meta["io.quiver/conversation"]`), answering questions by retrying with
//! `inputResponses` and `requestState`. The conversation is played by
//! `mcp_driver`.

use std::sync::Arc;

use quiver_host::{Config, Serving, mcp_front};
use quiver_mcp::Front;
use quiver_mcp::http::MCP_PATH;
use quiver_model::world::{Op, World};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use tokio_util::sync::CancellationToken;

use super::harness::{Harness, Run};
use super::mcp_client::{Client, Connected, serve};
use super::mcp_driver::run_with;

/// Runs `ops` over `world` through the MCP front over HTTP; `stateless`: a generic
/// 2026-07-28 client without turn ids, else a 2025-11-25 client in a session with them.
pub fn run_case(world: &World, ops: &[Op], stateless: bool) -> Run {
    run_with(world, ops, !stateless, async |h, person| {
        connect(h, person, stateless).await
    })
}

/// Starts the HTTP front over the harness's runtime on a loopback port and connects `person`
/// to it with the owner's token.
async fn connect(h: &Harness, person: Client, stateless: bool) -> Connected {
    // reqwest is built without a crypto provider; plain HTTP needs none, but a client cannot be
    // built without one.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let serving = Serving {
        stdio: false,
        allow_anonymous: false,
    };
    let served = mcp_front(&Config::default(), &h.dir.path().join("state.db"), serving).unwrap();
    let token = served
        .owner_token
        .expect("an owner's token over HTTP")
        .token;
    let front = Arc::new(Front::new(h.runtime.clone(), served.config, vec![0x42; 32]));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}{MCP_PATH}", listener.local_addr().unwrap());
    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    let server = tokio::spawn(async move {
        let _ = quiver_mcp::serve_http(front, listener, stop).await;
    });
    let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(token);
    let transport = StreamableHttpClientTransport::from_config(config);
    Connected {
        client: serve(person, transport).await,
        passes_handle: stateless,
        handle: None,
        shutdown,
        server,
    }
}
