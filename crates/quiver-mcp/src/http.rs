//! Streamable HTTP: the rmcp service behind axum, with bearer tokens mapped to callers,
//! 2025-11-25 sessions bound to the caller that made them, `Origin` and `Host` validation,
//! malformed requests refused before the protocol layer, and a graceful shutdown.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::McpError;
use crate::front::{Caller, Front};
use crate::sessions::{Admit, SESSION_IDLE, Sessions};
use crate::wire::{Authenticated, QuiverServer, Transport};

/// The path the MCP endpoint is served at.
pub const MCP_PATH: &str = "/mcp";
/// The largest request body read (rmcp's own limit).
const MAX_BODY: usize = 4 << 20;
const SESSION_HEADER: &str = "mcp-session-id";

fn unauthorized(why: &str) -> Response {
    let mut response = (StatusCode::UNAUTHORIZED, format!("{why}\n")).into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"quiver\""),
    );
    response
}

/// A JSON-RPC error response outside any session (`id` null).
fn rpc_error(status: StatusCode, code: i64, message: String) -> Response {
    let body = json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}});
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// The router's shared state: the front and the sessions' owners.
#[derive(Clone)]
struct Gate {
    front: Arc<Front>,
    sessions: Arc<Sessions>,
}

/// The caller of a request: a bearer token's, or anonymous when the configuration allows it
/// (never the owner).
fn authenticate(front: &Front, request: &Request) -> Result<Caller, &'static str> {
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
            let token = presented
                .and_then(|t| config.token(t))
                .ok_or("unknown bearer token")?;
            Ok(Caller {
                principal: token.principal.clone(),
                origin: token.origin.clone(),
            })
        }
        None if !config.allow_anonymous => Err(
            "this Quiver server needs `Authorization: Bearer <token>` (the token `quiver serve --http` printed, kept in the state folder's `mcp-token`)",
        ),
        None => Ok(Caller::local(quiver_policy::Principal::anonymous())),
    }
}

/// A request refused before the protocol layer: its HTTP status, JSON-RPC code and message.
type Refusal = (StatusCode, i64, String);

/// Reads a POST body whole and checks it is JSON: otherwise a JSON-RPC parse error (-32700).
async fn json_body(request: Request) -> Result<(Request, Option<Value>), Refusal> {
    if request.method() != Method::POST {
        return Ok((request, None));
    }
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, MAX_BODY).await.map_err(|_| {
        (
            StatusCode::PAYLOAD_TOO_LARGE,
            -32600,
            format!("the request body is larger than {MAX_BODY} bytes"),
        )
    })?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|e| {
        (
            StatusCode::BAD_REQUEST,
            -32700,
            format!("Parse error: the body is not JSON ({e})"),
        )
    })?;
    Ok((Request::from_parts(parts, Body::from(bytes)), Some(value)))
}

/// The address a connection comes from, put in each of its requests' extensions.
#[derive(Debug, Clone, Copy)]
struct Peer(std::net::IpAddr);

/// Which client a request comes from, for its default conversation: a digest of its bearer
/// token and the address it connects from; `None` without a token.
fn client_key(request: &Request) -> Option<String> {
    use sha2::{Digest, Sha256};
    let token = request.headers().get(header::AUTHORIZATION)?.as_bytes();
    let peer = request
        .extensions()
        .get::<Peer>()
        .map(|p| p.0.to_string())
        .unwrap_or_default();
    let mut hash = Sha256::new();
    hash.update(token);
    hash.update([0]);
    hash.update(peer.as_bytes());
    Some(
        hash.finalize()
            .iter()
            .take(16)
            .map(|b| format!("{b:02x}"))
            .collect(),
    )
}

/// Authenticates, refuses ambiguous or malformed requests, and keeps each 2025-11-25
/// session to the caller that created it.
async fn gate(State(gate): State<Gate>, request: Request, next: Next) -> Response {
    if request.headers().get_all(header::HOST).iter().count() > 1 {
        return (StatusCode::BAD_REQUEST, "more than one Host header\n").into_response();
    }
    let caller = match authenticate(&gate.front, &request) {
        Ok(caller) => caller,
        Err(why) => return unauthorized(why),
    };
    let (mut request, message) = match json_body(request).await {
        Ok(read) => read,
        Err((status, code, message)) => return rpc_error(status, code, message),
    };
    let session = request
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let initialize = message
        .as_ref()
        .and_then(|m| m.get("method"))
        .and_then(Value::as_str)
        == Some("initialize");
    match gate.sessions.admit(session.as_deref(), &caller, initialize) {
        Admit::Pass => {}
        Admit::Unknown => {
            // Another caller's session answers as if it did not exist.
            return (StatusCode::NOT_FOUND, "Not Found: Session not found\n").into_response();
        }
        Admit::CallerFull => {
            return rpc_error(
                StatusCode::TOO_MANY_REQUESTS,
                -32000,
                "this caller holds too many open MCP sessions; end one (DELETE) or wait for one to expire".into(),
            );
        }
        Admit::Full => {
            return rpc_error(
                StatusCode::SERVICE_UNAVAILABLE,
                -32000,
                "too many open MCP sessions; try again later".into(),
            );
        }
    }
    let deleting = request.method() == Method::DELETE;
    let client = client_key(&request);
    request.extensions_mut().insert(Authenticated {
        caller: caller.clone(),
        client,
    });
    // One span per request, as `crate::traced` gives each stdio request.
    let span = crate::traced::http_span(request.method(), session.as_deref(), message.as_ref());
    let response = crate::traced::http_request(span, next.run(request)).await;
    match (&session, response.headers().get(SESSION_HEADER)) {
        (None, Some(created)) if response.status().is_success() => {
            if let Ok(created) = created.to_str() {
                gate.sessions.bind(created, caller);
            }
        }
        (Some(id), _) if deleting && response.status().is_success() => gate.sessions.end(id),
        _ => {}
    }
    response
}

/// The axum router serving MCP at [`MCP_PATH`] for connections to `local`, and webhooks at
/// [`HOOKS_PATH`](crate::hooks::HOOKS_PATH).
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
    let mut manager = LocalSessionManager::default();
    manager.session_config.keep_alive = Some(SESSION_IDLE);
    let service = StreamableHttpService::new(
        move || Ok(QuiverServer::new(factory_front.clone(), Transport::Http)),
        Arc::new(manager),
        config,
    );
    let gate_state = Gate {
        front: front.clone(),
        sessions: Arc::new(Sessions::default()),
    };
    let hooks = crate::hooks::router(front.clone());
    Router::new()
        .route_service(MCP_PATH, service)
        .layer(axum::middleware::from_fn_with_state(gate_state, gate))
        // Webhooks authenticate by their signature, not by the MCP gate's bearer token.
        .merge(hooks)
}

/// How long open connections get to finish after `shutdown`.
const DRAIN: std::time::Duration = std::time::Duration::from_secs(5);

/// Serves MCP over Streamable HTTP on `listener` until `shutdown` is cancelled. A connection
/// that does not send a request's headers within the configuration's `header_timeout` is
/// closed.
pub async fn serve_http(
    front: Arc<Front>,
    listener: tokio::net::TcpListener,
    shutdown: CancellationToken,
) -> Result<(), McpError> {
    use hyper_util::rt::{TokioIo, TokioTimer};
    use hyper_util::service::TowerToHyperService;
    use tower::ServiceExt as _;

    let local = listener.local_addr().map_err(McpError::Io)?;
    let header_timeout = front.config().header_timeout;
    let app = router(front, local, shutdown.child_token());
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    loop {
        let (stream, peer) = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::warn!(%error, "cannot accept an HTTP connection");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let peer = Peer(peer.ip());
        let service = TowerToHyperService::new(app.clone().map_request(
            move |mut request: axum::http::Request<hyper::body::Incoming>| {
                request.extensions_mut().insert(peer);
                request
            },
        ));
        let connection = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(header_timeout)
            .serve_connection(TokioIo::new(stream), service);
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, "HTTP connection ended");
            }
        });
    }
    if tokio::time::timeout(DRAIN, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("MCP HTTP connections still open after shutdown were closed");
    }
    Ok(())
}
