//! Anthropic messages (`POST {base_url}/v1/messages`): `tool_use` and `tool_result` blocks,
//! streaming events, lenient about missing and `null` fields.

use std::io::BufReader;

use serde::Deserialize;
use serde_json::{Value, json};

use super::http::{Client, read_error};
use super::sse::Events;
use super::{
    ChatRequest, Message, ModelReply, Provider, ProviderError, ToolCall, ToolChoice, Usage,
    lenient_u64, null_default, parse_arguments,
};

/// The API version header sent with every request.
pub const API_VERSION: &str = "2023-06-01";

/// Tokens per reply when the configuration sets none (the API requires a value).
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// An Anthropic provider.
pub struct Anthropic {
    name: String,
    client: Client,
}

impl Anthropic {
    /// A provider named `name` over `client`.
    pub fn new(name: &str, client: Client) -> Self {
        Self {
            name: name.to_owned(),
            client,
        }
    }
}

/// The request body for `request`: consecutive messages of one role merged into one, tool
/// results as `tool_result` blocks of a user message.
pub fn body(request: &ChatRequest) -> Value {
    let mut messages: Vec<(String, Vec<Value>)> = Vec::new();
    let mut push = |role: &str, block: Value| match messages.last_mut() {
        Some((r, blocks)) if r == role => blocks.push(block),
        _ => messages.push((role.to_owned(), vec![block])),
    };
    for m in &request.messages {
        match m {
            Message::User { text } => push("user", json!({"type": "text", "text": text})),
            Message::Assistant { text, tool_calls } => {
                if !text.is_empty() {
                    push("assistant", json!({"type": "text", "text": text}));
                }
                for c in tool_calls {
                    let input = if c.arguments.is_object() {
                        c.arguments.clone()
                    } else {
                        json!({})
                    };
                    push(
                        "assistant",
                        json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input}),
                    );
                }
            }
            Message::Tool {
                call_id,
                content,
                is_error,
                ..
            } => push(
                "user",
                json!({"type": "tool_result", "tool_use_id": call_id, "content": content, "is_error": is_error}),
            ),
        }
    }
    let messages: Vec<Value> = messages
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect();
    let mut body = json!({
        "model": request.model,
        "max_tokens": request.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        "messages": messages,
        "stream": request.stream,
    });
    if !request.system.is_empty() {
        body["system"] = json!(request.system);
    }
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.input_schema}))
            .collect();
        body["tool_choice"] = match &request.tool_choice {
            ToolChoice::Auto => json!({"type": "auto"}),
            ToolChoice::None => json!({"type": "none"}),
            ToolChoice::Required => json!({"type": "any"}),
            ToolChoice::Tool(name) => json!({"type": "tool", "name": name}),
        };
    }
    if let Some(t) = request.temperature {
        body["temperature"] = json!(t);
    }
    body
}

#[derive(Debug, Default, Deserialize)]
struct Reply {
    #[serde(default, deserialize_with = "null_default")]
    content: Vec<Block>,
    #[serde(default, deserialize_with = "null_default")]
    stop_reason: Option<String>,
    #[serde(default, deserialize_with = "null_default")]
    usage: AUsage,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
struct Block {
    #[serde(rename = "type", default, deserialize_with = "null_default")]
    kind: String,
    #[serde(default, deserialize_with = "null_default")]
    text: String,
    #[serde(default, deserialize_with = "null_default")]
    id: String,
    #[serde(default, deserialize_with = "null_default")]
    name: String,
    #[serde(default)]
    input: Value,
}

#[derive(Debug, Default, Deserialize)]
struct AUsage {
    #[serde(default, deserialize_with = "lenient_u64")]
    input_tokens: u64,
    #[serde(default, deserialize_with = "lenient_u64")]
    output_tokens: u64,
}

/// One streaming event's payload.
#[derive(Debug, Default, Deserialize)]
struct StreamEvent {
    #[serde(rename = "type", default, deserialize_with = "null_default")]
    kind: String,
    #[serde(default, deserialize_with = "null_default")]
    index: Option<usize>,
    #[serde(default, deserialize_with = "null_default")]
    message: Option<Reply>,
    #[serde(default, deserialize_with = "null_default")]
    content_block: Option<Block>,
    #[serde(default, deserialize_with = "null_default")]
    delta: Option<Delta>,
    #[serde(default, deserialize_with = "null_default")]
    usage: Option<AUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
struct Delta {
    #[serde(default, deserialize_with = "null_default")]
    text: String,
    #[serde(default, deserialize_with = "null_default")]
    partial_json: String,
    #[serde(default, deserialize_with = "null_default")]
    stop_reason: Option<String>,
}

fn input_value(input: &Value) -> Value {
    match input {
        Value::Object(_) => input.clone(),
        Value::String(s) => parse_arguments(s),
        _ => json!({}),
    }
}

impl Provider for Anthropic {
    fn name(&self) -> &str {
        &self.name
    }

    fn complete(
        &self,
        request: &ChatRequest,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<ModelReply, ProviderError> {
        let base = self.client.config.base_url.trim_end_matches('/');
        let url = if base.ends_with("/v1") {
            format!("{base}/messages")
        } else {
            format!("{base}/v1/messages")
        };
        let mut headers = vec![("anthropic-version", API_VERSION.to_owned())];
        if let Some(key) = self.client.key() {
            headers.push(("x-api-key", key.to_owned()));
        }
        let response = self.client.post(&url, &headers, &body(request))?;
        let malformed = |message: String| ProviderError::Malformed {
            url: url.clone(),
            message,
        };
        if !request.stream {
            let text = response
                .text()
                .map_err(|e| self.client.send_error(&url, &e))?;
            let reply: Reply = serde_json::from_str(&text).map_err(|e| {
                malformed(format!(
                    "{e}; the answer began `{}`",
                    text.chars().take(120).collect::<String>()
                ))
            })?;
            if let Some(error) = reply.error {
                return Err(malformed(format!("the server sent an error: {error}")));
            }
            let mut out = ModelReply {
                stop_reason: reply.stop_reason,
                usage: Usage {
                    input_tokens: reply.usage.input_tokens,
                    output_tokens: reply.usage.output_tokens,
                },
                ..ModelReply::default()
            };
            for (i, block) in reply.content.into_iter().enumerate() {
                match block.kind.as_str() {
                    "text" => out.text.push_str(&block.text),
                    "tool_use" => out.tool_calls.push(ToolCall {
                        id: if block.id.is_empty() {
                            format!("toolu_{i}")
                        } else {
                            block.id
                        },
                        name: block.name,
                        arguments: input_value(&block.input),
                    }),
                    _ => {}
                }
            }
            return Ok(out);
        }
        let mut out = ModelReply::default();
        // Blocks by index: (kind, id, name, text or partial JSON).
        let mut blocks: Vec<(usize, String, String, String, String)> = Vec::new();
        for event in Events::new(BufReader::new(response)) {
            let event = event.map_err(|e| read_error(&self.client, &url, &e))?;
            let data = event.data.trim();
            if data.is_empty() {
                continue;
            }
            let parsed: StreamEvent = serde_json::from_str(data).map_err(|e| {
                malformed(format!(
                    "a stream event is not JSON ({e}): `{}`",
                    data.chars().take(120).collect::<String>()
                ))
            })?;
            let kind = if parsed.kind.is_empty() {
                event.name.as_str()
            } else {
                parsed.kind.as_str()
            };
            match kind {
                "message_start" => {
                    if let Some(m) = &parsed.message {
                        out.usage.input_tokens = m.usage.input_tokens;
                        out.usage.output_tokens = m.usage.output_tokens;
                    }
                }
                "content_block_start" => {
                    let index = parsed.index.unwrap_or(blocks.len());
                    let b = parsed.content_block.unwrap_or_default();
                    let initial = if b.kind == "text" {
                        on_text(&b.text);
                        b.text.clone()
                    } else if b.input.as_object().is_some_and(|o| !o.is_empty()) {
                        b.input.to_string()
                    } else {
                        String::new()
                    };
                    blocks.push((index, b.kind, b.id, b.name, initial));
                }
                "content_block_delta" => {
                    let delta = parsed.delta.unwrap_or_default();
                    let position = match parsed.index {
                        Some(i) => blocks.iter().position(|b| b.0 == i),
                        None => blocks.len().checked_sub(1),
                    };
                    let Some(p) = position else {
                        return Err(malformed("a delta came before its content block".into()));
                    };
                    let block = &mut blocks[p];
                    if !delta.text.is_empty() {
                        on_text(&delta.text);
                        block.4.push_str(&delta.text);
                    }
                    block.4.push_str(&delta.partial_json);
                }
                "message_delta" => {
                    if let Some(reason) = parsed.delta.and_then(|d| d.stop_reason) {
                        out.stop_reason = Some(reason);
                    }
                    if let Some(u) = parsed.usage {
                        if u.input_tokens > 0 {
                            out.usage.input_tokens = u.input_tokens;
                        }
                        out.usage.output_tokens = u.output_tokens.max(out.usage.output_tokens);
                    }
                }
                "error" => {
                    let error = parsed.error.unwrap_or(Value::Null);
                    let message = error
                        .get("message")
                        .and_then(Value::as_str)
                        .map_or_else(|| error.to_string(), str::to_owned);
                    return Err(malformed(format!("the server sent an error: {message}")));
                }
                "message_stop" => break,
                _ => {}
            }
        }
        for (i, (_, kind, id, name, text)) in blocks.into_iter().enumerate() {
            match kind.as_str() {
                "text" => out.text.push_str(&text),
                "tool_use" => out.tool_calls.push(ToolCall {
                    id: if id.is_empty() {
                        format!("toolu_{i}")
                    } else {
                        id
                    },
                    name,
                    arguments: parse_arguments(&text),
                }),
                _ => {}
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::ToolSpec;

    #[test]
    fn tool_results_merge_into_one_user_message() {
        let request = ChatRequest {
            model: "m".into(),
            system: "s".into(),
            messages: vec![
                Message::User { text: "q".into() },
                Message::Assistant {
                    text: String::new(),
                    tool_calls: vec![
                        ToolCall {
                            id: "a".into(),
                            name: "x".into(),
                            arguments: json!({"k": 1}),
                        },
                        ToolCall {
                            id: "b".into(),
                            name: "y".into(),
                            arguments: json!("{bad"),
                        },
                    ],
                },
                Message::Tool {
                    call_id: "a".into(),
                    name: "x".into(),
                    content: "1".into(),
                    is_error: false,
                },
                Message::Tool {
                    call_id: "b".into(),
                    name: "y".into(),
                    content: "e".into(),
                    is_error: true,
                },
            ],
            tools: vec![ToolSpec {
                name: "x".into(),
                description: "d".into(),
                input_schema: json!({"type": "object"}),
            }],
            tool_choice: ToolChoice::Required,
            ..ChatRequest::default()
        };
        let b = body(&request);
        let roles: Vec<&str> = b["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["user", "assistant", "user"]);
        assert_eq!(b["messages"][1]["content"][1]["input"], json!({}));
        assert_eq!(b["messages"][2]["content"][1]["is_error"], json!(true));
        assert_eq!(b["tool_choice"], json!({"type": "any"}));
        assert_eq!(b["max_tokens"], json!(DEFAULT_MAX_TOKENS));
    }

    #[test]
    fn lenient_replies_parse() {
        let r: Reply = serde_json::from_str(r#"{"content":[{"type":"text","text":null},{"type":"tool_use","name":"w","input":null},{"type":"thinking","thinking":"…"}],"usage":null,"stop_reason":null,"extra":1}"#).unwrap();
        assert_eq!(r.content.len(), 3);
        assert_eq!(r.usage.input_tokens, 0);
    }
}
