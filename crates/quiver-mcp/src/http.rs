//! Streamable HTTP: the rmcp service behind axum, with bearer tokens mapped to principals,
//! `Origin` and `Host` validation, and a graceful shutdown.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use crate::McpError;
use crate::front::Front;
use crate::wire::{Authenticated, QuiverServer, Transport};

/// The path the MCP endpoint is served at.
pub const MCP_PATH: &str = "/mcp";

fn unauthorized(why: &str) -> Response {
    let mut response = (StatusCode::UNAUTHORIZED, format!("{why}\n")).into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"quiver\""),
    );
    response
}

/// Maps `Authorization: Bearer <token>` to the token's principal; without a header the
/// request is anonymous (when the configuration allows it), never the owner.
async fn authenticate(
    State(front): State<Arc<Front>>,
    mut request: Request,
    next: Next,
) -> Response {
    let config = front.config();
    match request.headers().get(header::AUTHORIZATION) {
        Some(value) => {
            let presented = value
                .to_str()
                .ok()
                .and_then(|v| {
                    v.strip_prefix("Bearer ")
                        .or_else(|| v.strip_prefix("bearer "))
                })
                .map(str::trim);
            let Some(principal) = presented.and_then(|t| config.principal_for_token(t)) else {
                return unauthorized("unknown bearer token");
            };
            let principal = principal.clone();
            request.extensions_mut().insert(Authenticated(principal));
        }
        None if !config.allow_anonymous => {
            return unauthorized("this Quiver server needs `Authorization: Bearer <token>`");
        }
        None => {}
    }
    next.run(request).await
}

/// The axum router serving MCP at [`MCP_PATH`] for connections to `local`.
pub fn router(front: Arc<Front>, local: SocketAddr, shutdown: CancellationToken) -> Router {
    let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
    let ip = local.ip().to_string();
    if !hosts.contains(&ip) && !local.ip().is_unspecified() {
        hosts.push(ip);
    }
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(front.config().allowed_origins.clone())
        .with_legacy_session_mode(true)
        // Stateless requests get one JSON response (SSE only when a message must precede it).
        .with_json_response(true)
        .with_cancellation_token(shutdown);
    let factory_front = front.clone();
    let service = StreamableHttpService::new(
        move || Ok(QuiverServer::new(factory_front.clone(), Transport::Http)),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    Router::new()
        .route_service(MCP_PATH, service)
        .layer(axum::middleware::from_fn_with_state(front, authenticate))
}

/// Serves MCP over Streamable HTTP on `listener` until `shutdown` is cancelled.
pub async fn serve_http(
    front: Arc<Front>,
    listener: tokio::net::TcpListener,
    shutdown: CancellationToken,
) -> Result<(), McpError> {
    let local = listener.local_addr().map_err(McpError::Io)?;
    let app = router(front, local, shutdown.child_token());
    axum::serve(listener, app)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
        .map_err(McpError::Io)
}
