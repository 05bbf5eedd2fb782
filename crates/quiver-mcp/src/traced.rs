//! One span per MCP request, named `mcp_request`, with its JSON-RPC id, method and, for
//! `tools/call`, the tool: on stdio [`Traced`] wraps the server's service, with an event when
//! a request arrives and when it is answered; over HTTP [`http_span`] is the span of each HTTP
//! request (rmcp's `StreamableHttpService` takes a `ServerHandler`, not a wrapped service).
//! `RUST_LOG=quiver=debug quiver serve` then shows each request, the runtime's `call` span
//! (with the call id) inside it, and the sandbox start inside that.

use std::borrow::Cow;

use axum::http::Method;
use rmcp::ErrorData;
use rmcp::model::{ClientRequest, ProtocolVersion};
use rmcp::service::{
    MaybeSendFuture, NotificationContext, RequestContext, RoleServer, Service, ServiceRole,
};
use serde_json::Value;
use tracing::Instrument;

/// A service whose requests each run in a span of their own.
pub struct Traced<S>(pub S);

/// The tool a `tools/call` names.
fn tool_of(request: &ClientRequest) -> Option<&str> {
    match request {
        ClientRequest::CallToolRequest(call) => Some(call.params.name.as_ref()),
        _ => None,
    }
}

impl<S: Service<RoleServer>> Service<RoleServer> for Traced<S> {
    fn handle_request(
        &self,
        request: <RoleServer as ServiceRole>::PeerReq,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<<RoleServer as ServiceRole>::Resp, ErrorData>> + MaybeSendFuture + '_
    {
        let span = tracing::info_span!(
            "mcp_request",
            id = %context.id,
            method = request.method(),
            tool = tool_of(&request),
        );
        async move {
            tracing::debug!("request received");
            let answer = self.0.handle_request(request, context).await;
            match &answer {
                Ok(_) => tracing::debug!("request answered"),
                Err(error) => {
                    tracing::debug!(code = ?error.code, message = %error.message, "request failed")
                }
            }
            answer
        }
        .instrument(span)
    }

    fn handle_notification(
        &self,
        notification: <RoleServer as ServiceRole>::PeerNot,
        context: NotificationContext<RoleServer>,
    ) -> impl Future<Output = Result<(), ErrorData>> + MaybeSendFuture + '_ {
        self.0.handle_notification(notification, context)
    }

    fn get_info(&self) -> <RoleServer as ServiceRole>::Info {
        self.0.get_info()
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        self.0.supported_protocol_versions()
    }
}

/// Answers one HTTP request with `answer` inside `span` ([`http_span`]), with an event when it
/// arrives and one with the HTTP status when it is answered.
pub(crate) async fn http_request(
    span: tracing::Span,
    answer: impl Future<Output = axum::response::Response>,
) -> axum::response::Response {
    async move {
        tracing::debug!("request received");
        let response = answer.await;
        tracing::debug!(status = response.status().as_u16(), "request answered");
        response
    }
    .instrument(span)
    .await
}

/// The span of one HTTP request to the MCP endpoint: the HTTP method, the 2025-11-25 session
/// if any, and the JSON-RPC id, method and tool of its message.
pub(crate) fn http_span(
    http: &Method,
    session: Option<&str>,
    message: Option<&Value>,
) -> tracing::Span {
    let field = |key: &str| message.and_then(|m| m.get(key));
    let method = field("method").and_then(Value::as_str);
    let tool = (method == Some("tools/call"))
        .then(|| {
            field("params")
                .and_then(|p| p.get("name"))
                .and_then(Value::as_str)
        })
        .flatten();
    let id = field("id").map(ToString::to_string);
    tracing::info_span!(
        "mcp_request",
        http = %http,
        session,
        id = id.as_deref().map(tracing::field::display),
        method,
        tool,
    )
}
