//! LLM providers: one request and reply shape ([`ChatRequest`], [`ModelReply`]) for the loop,
//! translated by hand to OpenAI-compatible chat completions ([`openai`]) and Anthropic messages
//! ([`anthropic`]), over one HTTP client with timeouts and retries ([`http`]).

pub mod anthropic;
pub mod http;
pub mod openai;
mod sse;

use serde::Serialize;
use serde_json::Value;
use thiserror::Error;

use crate::config::{ProviderConfig, ProviderKind};

/// One message of the conversation the loop keeps.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// What the user said.
    User {
        /// The text.
        text: String,
    },
    /// What the model said: text and the tools it called.
    Assistant {
        /// The text (may be empty when it only called tools).
        text: String,
        /// Its tool calls, in order.
        tool_calls: Vec<ToolCall>,
    },
    /// A tool's result, answering one call.
    Tool {
        /// The call it answers.
        call_id: String,
        /// The tool's wire name.
        name: String,
        /// The result as the model reads it (JSON text).
        content: String,
        /// Whether it is an error.
        is_error: bool,
    },
}

/// A tool call the model made.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCall {
    /// The provider's id for the call (generated when the server sent none).
    pub id: String,
    /// The tool's wire name.
    pub name: String,
    /// The arguments: a JSON object, or a string holding what could not be parsed.
    pub arguments: Value,
}

/// A tool as sent to the model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSpec {
    /// Wire name.
    pub name: String,
    /// Description.
    pub description: String,
    /// JSON Schema of the input.
    pub input_schema: Value,
}

/// Whether and how the model must call a tool.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// No tool calls.
    None,
    /// At least one tool call.
    Required,
    /// This tool.
    Tool(String),
}

/// One request to a model.
#[derive(Debug, Clone, Default)]
pub struct ChatRequest {
    /// The model name.
    pub model: String,
    /// The system prompt.
    pub system: String,
    /// The conversation.
    pub messages: Vec<Message>,
    /// Tools offered natively (empty for the JSON action format).
    pub tools: Vec<ToolSpec>,
    /// Tool choice.
    pub tool_choice: ToolChoice,
    /// Whether to stream the reply.
    pub stream: bool,
    /// Most tokens to generate.
    pub max_tokens: Option<u32>,
    /// Sampling temperature.
    pub temperature: Option<f32>,
}

/// Token counts the server reported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    /// Prompt (input) tokens.
    pub input_tokens: u64,
    /// Generated (output) tokens.
    pub output_tokens: u64,
}

impl Usage {
    /// Both counts.
    pub fn total(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }

    /// Adds `other` to these counts.
    pub fn add(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
    }
}

/// The model's answer to one request.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ModelReply {
    /// Its text.
    pub text: String,
    /// Its tool calls, in order.
    pub tool_calls: Vec<ToolCall>,
    /// Token counts (zero when the server sent none).
    pub usage: Usage,
    /// Why it stopped, as the server said.
    pub stop_reason: Option<String>,
}

/// Why a request failed.
#[derive(Debug, Error)]
pub enum ProviderError {
    /// The endpoint could not be reached.
    #[error("cannot reach {url}: {message}")]
    Connect {
        /// The endpoint.
        url: String,
        /// Why.
        message: String,
    },
    /// No answer in time.
    #[error("{url} did not answer within {seconds} s")]
    Timeout {
        /// The endpoint.
        url: String,
        /// The timeout.
        seconds: f64,
    },
    /// The server answered with an error status.
    #[error("{url} answered {status}: {message}")]
    Status {
        /// The endpoint.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The server's error message.
        message: String,
    },
    /// The answer could not be read.
    #[error("cannot read the answer of {url}: {message}")]
    Malformed {
        /// The endpoint.
        url: String,
        /// What was wrong.
        message: String,
    },
    /// The key's environment variable is unset.
    #[error("the API key variable `{0}` is not set")]
    MissingKey(String),
}

/// Something that answers chat requests.
pub trait Provider: Send + Sync {
    /// The provider's name in the configuration.
    fn name(&self) -> &str;

    /// Sends `request`; text deltas go to `on_text` as they arrive when streaming.
    fn complete(
        &self,
        request: &ChatRequest,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<ModelReply, ProviderError>;
}

/// The provider a configuration describes.
pub fn from_config(
    name: &str,
    config: &ProviderConfig,
) -> Result<Box<dyn Provider>, ProviderError> {
    let client = http::Client::new(config)?;
    Ok(match config.kind {
        ProviderKind::Openai => Box::new(openai::OpenAi::new(name, client)),
        ProviderKind::Anthropic => Box::new(anthropic::Anthropic::new(name, client)),
    })
}

/// Parses model-written JSON arguments: an object passes, an empty string is `{}`, anything
/// else is kept as a string so the loop can tell the model what was wrong.
pub(crate) fn parse_arguments(raw: &str) -> Value {
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return Value::Object(serde_json::Map::new());
    }
    match serde_json::from_str::<Value>(trimmed) {
        Ok(value @ Value::Object(_)) => value,
        // Some servers double-encode: a JSON string holding the object.
        Ok(Value::String(inner)) => match serde_json::from_str::<Value>(&inner) {
            Ok(value @ Value::Object(_)) => value,
            _ => Value::String(raw.to_owned()),
        },
        _ => Value::String(raw.to_owned()),
    }
}

/// A null-tolerant default: `null` and a missing field both give `T::default()`.
pub(crate) fn null_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + serde::Deserialize<'de>,
{
    use serde::Deserialize;
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// A count that may be a number, a numeric string, null, or absent.
pub(crate) fn lenient_u64<'de, D>(deserializer: D) -> Result<u64, D::Error>
where
    D: serde::Deserializer<'de>,
{
    use serde::Deserialize;
    Ok(match Value::deserialize(deserializer)? {
        Value::Number(n) => n
            .as_u64()
            .or_else(|| n.as_f64().map(|f| f.max(0.0) as u64))
            .unwrap_or(0),
        Value::String(s) => s.trim().parse().unwrap_or(0),
        _ => 0,
    })
}

/// Text that may be a string, a list of parts with `text`, or null.
pub(crate) fn lenient_text<'de, D>(deserializer: D) -> Result<String, D::Error>
where
    D: serde::Deserializer<'de>,
{
    use serde::Deserialize;
    Ok(text_of(&Value::deserialize(deserializer)?))
}

/// The text of a content value: a string, or the `text` of each part of a list.
pub(crate) fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| match p {
                Value::String(s) => Some(s.clone()),
                other => other.get("text").and_then(Value::as_str).map(str::to_owned),
            })
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn arguments_are_read_leniently() {
        let cases: &[(&str, Value)] = &[
            (r#"{"city":"北京"}"#, json!({"city": "北京"})),
            ("", json!({})),
            ("  ", json!({})),
            (r#""{\"a\":1}""#, json!({"a": 1})),
            ("{not json", json!("{not json")),
            ("[1,2]", json!("[1,2]")),
        ];
        for (raw, want) in cases {
            assert_eq!(parse_arguments(raw), *want, "{raw}");
        }
    }

    #[test]
    fn text_takes_strings_and_parts() {
        assert_eq!(text_of(&json!("hi")), "hi");
        assert_eq!(
            text_of(&json!([{"type": "text", "text": "a"}, {"type": "x"}, "b"])),
            "ab"
        );
        assert_eq!(text_of(&Value::Null), "");
    }
}
