//! The only module that names rmcp types: the `ServerHandler` that translates MCP requests
//! into [`Front`] calls, the elicitation approver of the 2025-11-25 era, and the
//! `input_required` results of the 2026-07-28 era.

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use quiver_runtime::CallStatus;
use quiver_runtime::approver::{Answer, Approver, Card};
use quiver_store::ApprovalCard;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CustomNotification,
    DiscoverResult, ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction,
    GetSkillRequestParams, GetSkillResult, Implementation, InitializeRequestParams,
    InitializeResult, InputRequest, InputRequests, InputRequiredResult, ListResourcesResult,
    ListSkillsResult, ListToolsResult, MetaObject, PaginatedRequestParams, ProtocolVersion,
    ReadResourceDirectoryRequestParams, ReadResourceDirectoryResult, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, ServerCapabilities,
    ServerConfig, ServerNotification, Skill, SkillFrontmatter, SkillResource, SkillResources,
    SubscriptionFilter, Tool, ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer, SubscriptionContext};
use rmcp::{ErrorData, Peer, ServerHandler};
use serde_json::{Map, Value, json};

use crate::front::{
    Asker, CONVERSATION_META, CallRequest, CallResult, Caller, ConnectionSlot, Decision, Front,
    FrontError, Link, LinkShower, PendingQuestion, REPLAYED_META, Response, TURN_META, ToolSpec,
    Way, card_message, way_to_ask,
};
use crate::skills::{Child, SkillEntry, SkillFile, is_textual};

/// The key of the one input request a consent or approval question sends.
const DECISION_KEY: &str = "quiver_decision";

/// Which transport a server instance serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// stdio: the configured local principal.
    Stdio,
    /// Streamable HTTP: the bearer token's principal, else anonymous.
    Http,
}

/// The caller an HTTP request authenticated as (a bearer token's principal and origin), put in
/// the request's extensions by the auth layer, with the client it came from: a digest of the
/// bearer token and the address it connects from (`None` for an anonymous caller, who gets no
/// default conversation).
#[derive(Debug, Clone)]
pub struct Authenticated {
    /// Who calls.
    pub caller: Caller,
    /// Which client calls, for its default conversation.
    pub client: Option<String>,
}

/// One MCP server instance: a stdio connection, an HTTP session, or one stateless request.
#[derive(Clone)]
pub struct QuiverServer {
    front: Arc<Front>,
    slot: Arc<ConnectionSlot>,
    transport: Transport,
}

/// Sends `notifications/resources/list_changed` through `send` each time a catalog swap
/// changed the skills `caller` sees, until `done` completes or a send fails.
async fn tell_skill_changes<Send, Sent>(
    front: Arc<Front>,
    caller: Caller,
    done: impl Future<Output = ()>,
    send: Send,
) where
    Send: Fn() -> Sent,
    Sent: Future<Output = bool>,
{
    let mut swaps = front.catalog_swaps();
    let mut seen = front.skills_fingerprint(&caller);
    let mut done = std::pin::pin!(done);
    loop {
        tokio::select! {
            () = &mut done => return,
            changed = swaps.changed() => if changed.is_err() { return },
        }
        let now = front.skills_fingerprint(&caller);
        if now != seen {
            seen = now;
            if !send().await {
                return;
            }
        }
    }
}

/// Maps a front error to an MCP error: bad handles and states are the caller's mistake.
fn mcp_error(error: FrontError) -> ErrorData {
    match error {
        FrontError::BadHandle(_) | FrontError::BadRequestState(_) => {
            ErrorData::invalid_params(error.to_string(), None)
        }
        FrontError::Runtime(_) | FrontError::Interrupted(_) | FrontError::Turn(_) => {
            ErrorData::internal_error(error.to_string(), None)
        }
        FrontError::StillRunning => {
            ErrorData::internal_error(error.to_string(), Some(json!({"retry": true})))
        }
    }
}

fn is_modern(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// The elicitation modes the client declared: (form, url). An `elicitation` capability
/// naming neither is a form (the 2025-06-18 shape).
fn elicitation_modes(context: &RequestContext<RoleServer>) -> (bool, bool) {
    match context.client_capabilities().and_then(|c| c.elicitation) {
        Some(e) => (e.form.is_some() || e.url.is_none(), e.url.is_some()),
        None => (false, false),
    }
}

fn meta_handle(meta: Option<&MetaObject>) -> Option<String> {
    meta_string(meta, CONVERSATION_META)
}

fn meta_string(meta: Option<&MetaObject>, key: &str) -> Option<String> {
    meta.and_then(|m| m.get(key))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// The client's turn id ([`TURN_META`]) from the request's or the context's `_meta`.
fn meta_turn(request: Option<&MetaObject>, context: &RequestContext<RoleServer>) -> Option<String> {
    meta_string(request, TURN_META).or_else(|| meta_string(Some(&context.meta), TURN_META))
}

/// The form asking for a decision; a card that needs a person offers no "for this
/// conversation".
fn decision_form(card: &Card, message: String) -> Result<ElicitRequestParams, ErrorData> {
    let choices: Vec<Value> = Decision::CHOICES
        .iter()
        .filter(|(value, _)| !(card.needs_person && *value == "allow_conversation"))
        .map(|(value, title)| json!({"const": value, "title": title}))
        .collect();
    let schema = json!({
        "type": "object",
        "properties": {"decision": {"type": "string", "title": "Decision", "oneOf": choices}},
        "required": ["decision"],
    });
    let requested_schema = serde_json::from_value(schema)
        .map_err(|e| ErrorData::internal_error(format!("elicitation schema: {e}"), None))?;
    Ok(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema,
    })
}

/// Reads the client's reply to a question: its action, and a form's `decision` choice.
fn response_of(result: &ElicitResult) -> Response {
    match result.action {
        ElicitationAction::Accept => Response::Accept(
            result
                .content
                .as_ref()
                .and_then(|c| c.get("decision"))
                .and_then(Value::as_str)
                .map(str::to_owned),
        ),
        ElicitationAction::Decline => Response::Decline,
        _ => Response::Cancel,
    }
}

/// The URL-mode request that shows a card's console page. The 2026-07-28 schema has no
/// `elicitationId` (rmcp writes the field anyway): it carries the card's id, which the sealed
/// `requestState` binds the retry to.
fn link_request(link: Link, message: String) -> ElicitRequestParams {
    ElicitRequestParams::UrlElicitationParams {
        meta: None,
        message,
        url: link.url,
        elicitation_id: link.id,
    }
}

/// Asks the person through 2025-11-25 elicitation, blocking the pipeline's thread.
struct ElicitingApprover {
    peer: Peer<RoleServer>,
    handle: tokio::runtime::Handle,
}

impl Approver for ElicitingApprover {
    fn decide(&self, card: &Card) -> Answer {
        let Ok(params) = decision_form(card, card_message(card)) else {
            return Answer::Deny;
        };
        let peer = self.peer.clone();
        let result = self
            .handle
            .block_on(async move { peer.create_elicitation(params).await });
        match result {
            Ok(result) => response_of(&result).decision().answer_to(card),
            Err(error) => {
                tracing::warn!(%error, "elicitation failed");
                Answer::Unanswered
            }
        }
    }

    fn answer_question(&self, question: &str) -> Option<String> {
        let schema = serde_json::from_value(json!({
            "type": "object",
            "properties": {"answer": {"type": "string", "title": "Answer"}},
            "required": ["answer"],
        }))
        .ok()?;
        let peer = self.peer.clone();
        let params = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: question.to_owned(),
            requested_schema: schema,
        };
        let result = self
            .handle
            .block_on(async move { peer.create_elicitation(params).await })
            .ok()?;
        match result.action {
            ElicitationAction::Accept => result.content?.get("answer")?.as_str().map(str::to_owned),
            _ => None,
        }
    }
}

/// The method of the notification that closes a URL-mode question (MCP 2025-11-25).
const ELICITATION_COMPLETE: &str = "notifications/elicitation/complete";

/// Shows a card's console page through URL-mode elicitation, the elicitation id being the
/// card's id, blocking the pipeline's thread; a client that does not reply within `wait` has
/// not accepted.
struct LinkingClient {
    peer: Peer<RoleServer>,
    handle: tokio::runtime::Handle,
    wait: std::time::Duration,
}

impl LinkShower for LinkingClient {
    fn show(&self, card: &ApprovalCard, message: &str, url: &str) -> bool {
        let Ok(url) = url::Url::parse(url) else {
            tracing::warn!(url, "the console's address is not a URL");
            return false;
        };
        let peer = self.peer.clone();
        let (message, id, wait) = (message.to_owned(), card.id.clone(), Some(self.wait));
        let result = self
            .handle
            .block_on(async move { peer.elicit_url_with_timeout(message, url, id, wait).await });
        match result {
            Ok(action) => action == ElicitationAction::Accept,
            Err(error) => {
                tracing::warn!(%error, "URL elicitation failed");
                false
            }
        }
    }

    fn complete(&self, card: &ApprovalCard) {
        let notification = CustomNotification::new(
            ELICITATION_COMPLETE,
            Some(json!({"elicitationId": card.id})),
        );
        let peer = self.peer.clone();
        let sent = self.handle.block_on(async move {
            peer.send_notification(ServerNotification::CustomNotification(notification))
                .await
        });
        if let Err(error) = sent {
            tracing::warn!(%error, "cannot tell the client the question is closed");
        }
    }
}

fn to_tool(spec: ToolSpec) -> Tool {
    let object = |v: Value| match v {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    let mut tool = Tool::new(
        spec.name,
        spec.description,
        Arc::new(object(spec.input_schema)),
    );
    if let Some(output) = spec.output_schema
        && output.get("type").and_then(Value::as_str) == Some("object")
    {
        tool = tool.with_raw_output_schema(Arc::new(object(output)));
    }
    let mut annotations = ToolAnnotations::new().read_only(spec.read_only);
    if !spec.read_only {
        annotations = annotations.destructive(spec.destructive);
    }
    tool.with_annotations(annotations)
}

fn file_resource(file: &SkillFile) -> Resource {
    let mut resource = Resource::new(&file.uri, &file.name).with_size(file.size);
    resource.mime_type = file.mime_type.map(Into::into);
    resource
}

fn skill_of(entry: &SkillEntry) -> Skill {
    let mut frontmatter = SkillFrontmatter::new(&entry.name, &entry.description);
    for (key, value) in &entry.frontmatter {
        if key != "name" && key != "description" {
            frontmatter = frontmatter.with_field(key.clone(), value.clone());
        }
    }
    // The frontmatter as written: a Unicode name stays as the author wrote it.
    if let Some(Value::String(name)) = entry.frontmatter.get("name") {
        frontmatter.name.clone_from(name);
    }
    // Each digest is computed by streaming the file (kept until it changes); a file that can
    // no longer be read is left out.
    let files = entry
        .files
        .iter()
        .filter_map(|f| match f.digest() {
            Ok(digest) => Some(SkillResource::new(&f.uri, &digest, f.size)),
            Err(why) => {
                tracing::warn!(uri = %f.uri, "not listed: {why}");
                None
            }
        })
        .collect();
    Skill::new(&entry.uri, frontmatter, SkillResources::Files(files))
}

/// The file's contents, read now (at most the size a skill file may have).
fn contents_of(file: &SkillFile) -> Result<ResourceContents, ErrorData> {
    let bytes = file.read().map_err(|why| {
        ErrorData::internal_error(format!("cannot read {}: {why}", file.uri), None)
    })?;
    let text = is_textual(file.mime_type)
        .then_some(&bytes)
        .filter(|b| !b.contains(&0))
        .and_then(|b| std::str::from_utf8(b).ok());
    let contents = match text {
        Some(text) => ResourceContents::text(text, &file.uri),
        None => ResourceContents::blob(STANDARD.encode(&bytes), &file.uri),
    };
    Ok(match file.mime_type {
        Some(mime) => contents.with_mime_type(mime),
        None => contents,
    })
}

impl QuiverServer {
    /// A server instance for one connection (stdio, or one HTTP session or request).
    pub fn new(front: Arc<Front>, transport: Transport) -> QuiverServer {
        QuiverServer {
            front,
            slot: Arc::new(ConnectionSlot::connection()),
            transport,
        }
    }

    fn caller(&self, context: &RequestContext<RoleServer>) -> Caller {
        match self.transport {
            Transport::Stdio => Caller::local(self.front.config().stdio_principal.clone()),
            Transport::Http => context
                .extensions
                .get::<axum::http::request::Parts>()
                .and_then(|parts| parts.extensions.get::<Authenticated>())
                .map_or_else(
                    || Caller::local(quiver_policy::Principal::anonymous()),
                    |a| a.caller.clone(),
                ),
        }
    }

    /// The connection's conversation slot; for a stateless HTTP request, its client's default
    /// conversation (a token holder's), else none.
    fn slot(&self, context: &RequestContext<RoleServer>) -> Arc<ConnectionSlot> {
        if self.transport != Transport::Http || !is_modern(context) {
            return self.slot.clone();
        }
        let client = context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Authenticated>())
            .and_then(|a| a.client.clone());
        match client {
            Some(client) => {
                let program = context
                    .client_info()
                    .map(|info| format!("{}/{}", info.name, info.version))
                    .unwrap_or_default();
                self.front.client_slot(&format!("{client} {program}"))
            }
            None => Arc::new(ConnectionSlot::stateless()),
        }
    }

    fn asker(&self, context: &RequestContext<RoleServer>) -> Asker {
        let (form, url) = elicitation_modes(context);
        let console = self.front.config().console_url.is_some();
        match way_to_ask(is_modern(context), form, url, console) {
            Way::Form => Asker::Now(Arc::new(ElicitingApprover {
                peer: context.peer.clone(),
                handle: tokio::runtime::Handle::current(),
            })),
            Way::Deferred => Asker::Deferred,
            Way::Link => Asker::Link(Arc::new(LinkingClient {
                peer: context.peer.clone(),
                handle: tokio::runtime::Handle::current(),
                wait: self.front.config().approval_wait,
            })),
            Way::DeferredLink => Asker::DeferredLink,
            Way::AnswerAt => Asker::Console,
        }
    }

    /// The `instructions` for the caller of `context`, or why they cannot be given.
    fn instructions(&self, context: &RequestContext<RoleServer>) -> Result<String, ErrorData> {
        self.front
            .instructions(&self.caller(context))
            .map_err(|error| ErrorData::internal_error(error.to_string(), None))
    }

    fn visible_skills(&self, caller: &Caller) -> Vec<SkillEntry> {
        self.front.visible_skills(caller)
    }
}

impl ServerHandler for QuiverServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_resources()
            .enable_resources_list_changed()
            .enable_skills_with_directory_read()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("quiver", env!("CARGO_PKG_VERSION")))
            .with_instructions(crate::front::INSTRUCTIONS)
    }

    /// `initialize` (2025-11-25): the negotiated answer, whose `instructions` carry the prompt
    /// sections this caller gets; it fails, as a chat turn does, when the required sections
    /// exceed the budget.
    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        context.peer.set_peer_info(request.clone());
        // This connection hears when the skills its caller sees change with a reload.
        let peer = context.peer.clone();
        let closed = {
            let peer = peer.clone();
            async move {
                while !peer.is_transport_closed() {
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                }
            }
        };
        tokio::spawn(tell_skill_changes(
            self.front.clone(),
            self.caller(&context),
            closed,
            move || {
                let peer = peer.clone();
                async move { peer.notify_resource_list_changed().await.is_ok() }
            },
        ));
        let mut result = self.negotiate_initialize(&request)?;
        result.instructions = Some(self.instructions(&context)?);
        Ok(result)
    }

    /// `server/discover` (2026-07-28): the same `instructions` as `initialize`.
    async fn discover(
        &self,
        context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        let mut info = self.get_info();
        info.instructions = Some(self.instructions(&context)?);
        Ok(DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            info,
        ))
    }

    /// `subscriptions/listen` (2026-07-28): accepted; rmcp reduces the filter to the advertised
    /// capabilities: only the resources' `listChanged` (the tool list never changes).
    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.clone())
    }

    /// The stream of one `subscriptions/listen`: `notifications/resources/list_changed` each
    /// time a reload changed the skills its caller sees, until the client cancels it.
    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        if context.accepted().resources_list_changed == Some(true) {
            let sink = context.sink().clone();
            tell_skill_changes(
                self.front.clone(),
                self.caller(context.request_context()),
                context.cancelled(),
                move || {
                    let sink = sink.clone();
                    async move { sink.notify_resource_list_changed().await.is_ok() }
                },
            )
            .await;
        } else {
            context.cancelled().await;
        }
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let caller = self.caller(&context);
        let tools = self.front.tools(&caller).into_iter().map(to_tool).collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller = self.caller(&context);
        let slot = self.slot(&context);
        let mut arguments = request.arguments.clone().unwrap_or_default();
        let handle_arg = match arguments.remove("conversation") {
            Some(Value::String(h)) if !h.is_empty() => Some(h),
            _ => None,
        };
        let handle = handle_arg
            .or_else(|| meta_handle(request.meta.as_deref()))
            .or_else(|| meta_handle(Some(&context.meta)));
        let (name, arguments) = if request.name == "call_tool" {
            let Some(Value::String(name)) = arguments.remove("name") else {
                return Err(ErrorData::invalid_params(
                    "`call_tool` needs `name`: the tool's name as `tool_search` found it",
                    None,
                ));
            };
            let inner = match arguments.remove("arguments") {
                None | Some(Value::Null) => Value::Object(Map::new()),
                Some(Value::String(text)) => serde_json::from_str(&text).map_err(|e| {
                    ErrorData::invalid_params(
                        format!("`arguments` is not a JSON object: {e}"),
                        None,
                    )
                })?,
                Some(other) => other,
            };
            (name, inner)
        } else {
            (request.name.to_string(), Value::Object(arguments))
        };
        if name == crate::runs::GET_RUN {
            let result = match self.front.get_run(&caller, &arguments) {
                Ok(run) => CallToolResult::success(vec![ContentBlock::text(run.to_string())]),
                Err(why) => CallToolResult::error(vec![ContentBlock::text(
                    json!({"error": why}).to_string(),
                )]),
            };
            return Ok(result.into());
        }
        if let Some(responses) = &request.input_responses
            && let Some((key, _)) = responses.iter().find(|(_, v)| !v.is_object())
        {
            return Err(ErrorData::invalid_params(
                format!("inputResponses[{key:?}] must be an object (the client's result)"),
                None,
            ));
        }
        let resume = match (&request.request_state, &request.input_responses) {
            (Some(state), Some(responses)) => {
                let answer = responses
                    .get(DECISION_KEY)
                    .and_then(|v| serde_json::from_value::<ElicitResult>(v.clone()).ok())
                    .ok_or_else(|| {
                        ErrorData::invalid_params(
                            format!("inputResponses has no `{DECISION_KEY}` elicitation result"),
                            None,
                        )
                    })?;
                Some((state.clone(), response_of(&answer)))
            }
            (Some(_), None) => {
                return Err(ErrorData::invalid_params(
                    "requestState without inputResponses",
                    None,
                ));
            }
            _ => None,
        };
        let stateless = self.transport == Transport::Http && is_modern(&context);
        let result = self
            .front
            .call(
                &caller,
                &slot,
                CallRequest {
                    name,
                    arguments,
                    handle,
                    resume,
                    turn: meta_turn(request.meta.as_deref(), &context),
                },
                self.asker(&context),
            )
            .await
            .map_err(mcp_error)?;
        match result {
            CallResult::NeedsInput(PendingQuestion {
                card,
                message,
                state,
                link,
            }) => {
                let params = match link {
                    Some(link) => link_request(link, message),
                    None => decision_form(&card, message)?,
                };
                let mut requests = InputRequests::new();
                requests.insert(
                    DECISION_KEY.to_owned(),
                    InputRequest::Elicitation(ElicitRequest::new(params)),
                );
                Ok(InputRequiredResult::new(Some(requests), Some(state)).into())
            }
            // A name the client sent that is no tool is a protocol error, as MCP's tools
            // chapter has it; inside `call_tool` the name is the model's argument, and the
            // model reads "unknown tool" as the tool's result. A tool that ran and found
            // something unknown (a forked skill's agent, by `read_skill`) answers as a tool.
            CallResult::Done { outcome, .. }
                if outcome.status == CallStatus::Unknown
                    && outcome.kind.is_none()
                    && request.name != "call_tool" =>
            {
                Err(ErrorData::invalid_params(
                    format!("Unknown tool: {}", request.name),
                    None,
                ))
            }
            CallResult::Done {
                outcome,
                handle,
                replayed,
            } => {
                let mut content = outcome.content.clone();
                if stateless && let Value::Object(map) = &mut content {
                    map.insert("conversation".into(), Value::String(handle.clone()));
                }
                let text = match &content {
                    Value::String(s) => s.clone(),
                    other => serde_json::to_string(other).unwrap_or_default(),
                };
                let mut result = if outcome.is_error() {
                    CallToolResult::error(vec![ContentBlock::text(text)])
                } else {
                    CallToolResult::success(vec![ContentBlock::text(text)])
                };
                let declared_output = request.name != "call_tool"
                    && self
                        .front
                        .tools(&caller)
                        .iter()
                        .any(|t| t.name == request.name && t.output_schema.is_some());
                if declared_output && !outcome.is_error() {
                    result.structured_content = Some(outcome.content.clone());
                }
                let mut meta = MetaObject::default();
                meta.0
                    .insert(CONVERSATION_META.into(), Value::String(handle));
                meta.0.insert(
                    "io.quiver/status".into(),
                    serde_json::to_value(outcome.status).unwrap_or_default(),
                );
                meta.0
                    .insert("io.quiver/call".into(), Value::String(outcome.call_id));
                if replayed {
                    meta.0.insert(REPLAYED_META.into(), Value::Bool(true));
                }
                result.meta = Some(meta);
                Ok(result.into())
            }
        }
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let caller = self.caller(&context);
        let resources = self
            .visible_skills(&caller)
            .iter()
            .flat_map(|s| {
                s.files.iter().map(|f| {
                    let r = file_resource(f);
                    if f.uri == s.uri {
                        // The SKILL.md is named and described by its frontmatter.
                        let mut r = r.with_description(&s.description);
                        s.name.clone_into(&mut r.name);
                        r
                    } else {
                        r
                    }
                })
            })
            .collect();
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let caller = self.caller(&context);
        let index = self.front.skill_index();
        let not_found = || {
            ErrorData::resource_not_found(
                format!("no such resource: {}", request.uri),
                Some(json!({"uri": request.uri})),
            )
        };
        let (skill, file) = index.file(&request.uri).ok_or_else(not_found)?;
        if !self.front.skill_visible(&caller, &skill.id) {
            return Err(not_found());
        }
        let mut result = ReadResourceResult::new(vec![contents_of(file)?]);
        // Reading a SKILL.md in a conversation activates the skill as `read_skill` does.
        if file.uri == skill.uri {
            let slot = self.slot(&context);
            let handle =
                meta_handle(request.meta.as_deref()).or_else(|| meta_handle(Some(&context.meta)));
            let stateless_without_handle =
                self.transport == Transport::Http && is_modern(&context) && handle.is_none();
            if !stateless_without_handle {
                let session = self
                    .front
                    .resolve(&caller, &slot, handle.as_deref())
                    .map_err(mcp_error)?;
                let outcome = self
                    .front
                    .activate_skill(
                        &caller,
                        &slot,
                        session,
                        skill.id.clone(),
                        meta_turn(request.meta.as_deref(), &context),
                    )
                    .await
                    .map_err(mcp_error)?;
                let mut meta = MetaObject::default();
                meta.0.insert(
                    "io.quiver/skill".into(),
                    json!({"id": skill.id, "status": outcome.content.get("status")}),
                );
                result.meta = Some(meta);
            }
        }
        Ok(result.into())
    }

    async fn list_skills(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, ErrorData> {
        let caller = self.caller(&context);
        let skills = self.visible_skills(&caller).iter().map(skill_of).collect();
        Ok(ListSkillsResult::with_all_items(skills))
    }

    async fn get_skill(
        &self,
        request: GetSkillRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, ErrorData> {
        let caller = self.caller(&context);
        let index = self.front.skill_index();
        index
            .skill(&request.uri)
            .filter(|s| self.front.skill_visible(&caller, &s.id))
            .map(|s| GetSkillResult::new(skill_of(s)))
            .ok_or_else(|| {
                ErrorData::invalid_params(format!("unknown skill {}", request.uri), None)
            })
    }

    async fn read_resource_directory(
        &self,
        request: ReadResourceDirectoryRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceDirectoryResult, ErrorData> {
        let caller = self.caller(&context);
        let index = self.front.skill_index();
        let not_dir =
            || ErrorData::invalid_params(format!("not a directory: {}", request.uri), None);
        let (key, children) = index.directory(&request.uri).ok_or_else(not_dir)?;
        // The directory belongs to the skill whose root is its prefix.
        let owner = index
            .skills
            .iter()
            .find(|s| key.starts_with(s.uri.trim_end_matches("/SKILL.md")))
            .ok_or_else(not_dir)?;
        if !self.front.skill_visible(&caller, &owner.id) {
            return Err(not_dir());
        }
        let items = children
            .iter()
            .map(|child| match child {
                Child::File(file) => file_resource(file),
                Child::Directory { uri, name } => {
                    Resource::new(uri, name).with_mime_type(rmcp::model::DIRECTORY_MIME_TYPE)
                }
            })
            .collect();
        Ok(ReadResourceDirectoryResult::with_all_items(items))
    }
}
