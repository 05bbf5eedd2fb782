//! OpenAI-compatible chat completions (`POST {base_url}/chat/completions`): OpenAI, DeepSeek,
//! Qwen (DashScope compatible mode), vLLM, Ollama, llama.cpp server.
//!
//! Every field of an answer is optional and `null`-tolerant: servers that call themselves
//! compatible omit `id`s, send `index`-less tool-call deltas, put usage in the last chunk or
//! nowhere, send arguments as an object instead of a string, or content as a list of parts.

use std::io::BufReader;

use serde::Deserialize;
use serde_json::{Value, json};

use super::http::{Client, read_error};
use super::sse::Events;
use super::{
    ChatRequest, Message, ModelReply, Provider, ProviderError, ToolCall, ToolChoice, Usage,
    lenient_text, lenient_u64, null_default, parse_arguments,
};

/// An OpenAI-compatible provider.
pub struct OpenAi {
    name: String,
    client: Client,
}

impl OpenAi {
    /// A provider named `name` over `client`.
    pub fn new(name: &str, client: Client) -> Self {
        Self {
            name: name.to_owned(),
            client,
        }
    }
}

/// The request body for `request`.
pub fn body(request: &ChatRequest) -> Value {
    let mut messages = Vec::new();
    if !request.system.is_empty() {
        messages.push(json!({"role": "system", "content": request.system}));
    }
    for m in &request.messages {
        messages.push(match m {
            Message::User { text } => json!({"role": "user", "content": text}),
            Message::Assistant { text, tool_calls } => {
                let mut msg = json!({"role": "assistant", "content": if text.is_empty() && !tool_calls.is_empty() { Value::Null } else { json!(text) }});
                if !tool_calls.is_empty() {
                    msg["tool_calls"] = tool_calls
                        .iter()
                        .map(|c| {
                            json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": match &c.arguments {
                                Value::String(raw) => raw.clone(),
                                other => other.to_string(),
                            }}})
                        })
                        .collect();
                }
                msg
            }
            Message::Tool {
                call_id, content, ..
            } => json!({"role": "tool", "tool_call_id": call_id, "content": content}),
        });
    }
    let mut body = json!({"model": request.model, "messages": messages, "stream": request.stream});
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.input_schema}}))
            .collect();
        body["tool_choice"] = match &request.tool_choice {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::None => json!("none"),
            ToolChoice::Required => json!("required"),
            ToolChoice::Tool(name) => json!({"type": "function", "function": {"name": name}}),
        };
        body["parallel_tool_calls"] = json!(true);
    }
    if request.stream {
        body["stream_options"] = json!({"include_usage": true});
    }
    if let Some(max) = request.max_tokens {
        body["max_tokens"] = json!(max);
    }
    if let Some(t) = request.temperature {
        body["temperature"] = json!(t);
    }
    body
}

#[derive(Debug, Default, Deserialize)]
struct Completion {
    #[serde(default, deserialize_with = "null_default")]
    choices: Vec<Choice>,
    #[serde(default, deserialize_with = "null_default")]
    usage: Option<OaUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
struct Choice {
    #[serde(default, deserialize_with = "null_default", alias = "delta")]
    message: OaMessage,
    #[serde(default, deserialize_with = "null_default")]
    finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct OaMessage {
    #[serde(default, deserialize_with = "lenient_text")]
    content: String,
    #[serde(default, deserialize_with = "null_default")]
    tool_calls: Vec<OaToolCall>,
    /// The legacy single `function_call`.
    #[serde(default, deserialize_with = "null_default")]
    function_call: Option<OaFunction>,
}

#[derive(Debug, Default, Deserialize)]
struct OaToolCall {
    #[serde(default, deserialize_with = "null_default")]
    id: Option<String>,
    #[serde(default, deserialize_with = "null_default")]
    index: Option<u64>,
    #[serde(default, deserialize_with = "null_default")]
    function: OaFunction,
}

#[derive(Debug, Default, Deserialize)]
struct OaFunction {
    #[serde(default, deserialize_with = "null_default")]
    name: String,
    #[serde(default)]
    arguments: Value,
}

#[derive(Debug, Default, Deserialize)]
struct OaUsage {
    #[serde(default, deserialize_with = "lenient_u64", alias = "input_tokens")]
    prompt_tokens: u64,
    #[serde(default, deserialize_with = "lenient_u64", alias = "output_tokens")]
    completion_tokens: u64,
}

impl OaUsage {
    fn usage(&self) -> Usage {
        Usage {
            input_tokens: self.prompt_tokens,
            output_tokens: self.completion_tokens,
        }
    }
}

fn arguments_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Tool calls being assembled from stream deltas.
#[derive(Debug, Default)]
struct Assembly {
    calls: Vec<(Option<u64>, String, String, String)>,
}

impl Assembly {
    fn push(&mut self, delta: &OaToolCall) {
        let args = arguments_text(&delta.function.arguments);
        let position = match (delta.index, &delta.id) {
            (Some(index), _) => self.calls.iter().position(|c| c.0 == Some(index)),
            // No index: a new id starts a new call, otherwise it continues the last one.
            (None, Some(id)) if !id.is_empty() => self.calls.iter().position(|c| &c.1 == id),
            (None, _) => self.calls.len().checked_sub(1),
        };
        match position {
            Some(p) => {
                let call = &mut self.calls[p];
                if call.1.is_empty()
                    && let Some(id) = &delta.id
                {
                    call.1.clone_from(id);
                }
                call.2.push_str(&delta.function.name);
                call.3.push_str(&args);
            }
            None => self.calls.push((
                delta.index,
                delta.id.clone().unwrap_or_default(),
                delta.function.name.clone(),
                args,
            )),
        }
    }

    fn finish(self) -> Vec<ToolCall> {
        self.calls
            .into_iter()
            .enumerate()
            .filter(|(_, c)| !c.2.is_empty())
            .map(|(i, (_, id, name, args))| ToolCall {
                id: if id.is_empty() {
                    format!("call_{i}")
                } else {
                    id
                },
                name,
                arguments: parse_arguments(&args),
            })
            .collect()
    }
}

impl Provider for OpenAi {
    fn name(&self) -> &str {
        &self.name
    }

    fn complete(
        &self,
        request: &ChatRequest,
        on_text: &mut dyn FnMut(&str),
    ) -> Result<ModelReply, ProviderError> {
        let url = self.client.url("chat/completions");
        let mut headers = Vec::new();
        if let Some(key) = self.client.key() {
            headers.push(("authorization", format!("Bearer {key}")));
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
            let completion: Completion = serde_json::from_str(&text)
                .map_err(|e| malformed(format!("{e}; the answer began {}", snippet(&text))))?;
            if let Some(error) = completion.error {
                return Err(malformed(format!("the server sent an error: {error}")));
            }
            let choice = completion
                .choices
                .into_iter()
                .next()
                .ok_or_else(|| malformed("the answer has no `choices`".into()))?;
            let mut assembly = Assembly::default();
            for call in &choice.message.tool_calls {
                assembly.push(call);
            }
            if let Some(f) = &choice.message.function_call {
                assembly.push(&OaToolCall {
                    id: None,
                    index: None,
                    function: OaFunction {
                        name: f.name.clone(),
                        arguments: f.arguments.clone(),
                    },
                });
            }
            return Ok(ModelReply {
                text: choice.message.content,
                tool_calls: assembly.finish(),
                usage: completion.usage.map(|u| u.usage()).unwrap_or_default(),
                stop_reason: choice.finish_reason,
            });
        }
        let mut reply = ModelReply::default();
        let mut assembly = Assembly::default();
        for event in Events::new(BufReader::new(response)) {
            let event = event.map_err(|e| read_error(&self.client, &url, &e))?;
            let data = event.data.trim();
            if data == "[DONE]" {
                break;
            }
            if data.is_empty() {
                continue;
            }
            let chunk: Completion = serde_json::from_str(data).map_err(|e| {
                malformed(format!(
                    "a stream chunk is not JSON ({e}): {}",
                    snippet(data)
                ))
            })?;
            if let Some(error) = chunk.error {
                return Err(malformed(format!("the server sent an error: {error}")));
            }
            if let Some(usage) = &chunk.usage {
                reply.usage = usage.usage();
            }
            for choice in chunk.choices {
                if !choice.message.content.is_empty() {
                    on_text(&choice.message.content);
                    reply.text.push_str(&choice.message.content);
                }
                for call in &choice.message.tool_calls {
                    assembly.push(call);
                }
                if choice.finish_reason.is_some() {
                    reply.stop_reason = choice.finish_reason;
                }
            }
        }
        reply.tool_calls = assembly.finish();
        Ok(reply)
    }
}

fn snippet(text: &str) -> String {
    let s: String = text.chars().take(120).collect();
    format!("`{s}`")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lenient_answers_parse() {
        let cases: &[(&str, &str, usize)] = &[
            (r#"{"choices":[{"message":{"content":"hi"}}]}"#, "hi", 0),
            (
                r#"{"choices":[{"message":{"content":null,"tool_calls":[{"function":{"name":"a","arguments":{"x":1}}}]}}],"usage":null}"#,
                "",
                1,
            ),
            (
                r#"{"id":null,"choices":[{"index":null,"message":{"role":"assistant","content":[{"type":"text","text":"p"}],"tool_calls":null},"finish_reason":null,"logprobs":{"x":1}}],"usage":{"prompt_tokens":"12","completion_tokens":null},"system_fingerprint":7}"#,
                "p",
                0,
            ),
            (
                r#"{"choices":[{"message":{"function_call":{"name":"f","arguments":"{}"}}}]}"#,
                "",
                1,
            ),
        ];
        for (text, content, calls) in cases {
            let c: Completion = serde_json::from_str(text).unwrap();
            let choice = &c.choices[0];
            assert_eq!(choice.message.content, *content, "{text}");
            let n = choice.message.tool_calls.len()
                + usize::from(choice.message.function_call.is_some());
            assert_eq!(n, *calls, "{text}");
        }
    }

    #[test]
    fn deltas_assemble_with_and_without_index() {
        let mut a = Assembly::default();
        for d in [
            r#"{"index":0,"id":"c1","function":{"name":"weather__","arguments":""}}"#,
            r#"{"index":1,"id":"c2","function":{"name":"calc__evaluate","arguments":"{\"e\":"}}"#,
            r#"{"index":0,"function":{"name":"forecast","arguments":"{\"city\":"}}"#,
            r#"{"index":0,"function":{"arguments":"\"北京\"}"}}"#,
            r#"{"index":1,"function":{"arguments":"\"1+1\"}"}}"#,
        ] {
            a.push(&serde_json::from_str(d).unwrap());
        }
        let calls = a.finish();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].name, "weather__forecast");
        assert_eq!(calls[0].arguments, json!({"city": "北京"}));
        assert_eq!(calls[1].arguments, json!({"e": "1+1"}));

        let mut a = Assembly::default();
        for d in [
            r#"{"id":"x","function":{"name":"a","arguments":"{\"k\":"}}"#,
            r#"{"function":{"arguments":"1}"}}"#,
            r#"{"id":"y","function":{"name":"b","arguments":"{}"}}"#,
        ] {
            a.push(&serde_json::from_str(d).unwrap());
        }
        let calls = a.finish();
        assert_eq!(
            calls.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert_eq!(calls[0].arguments, json!({"k": 1}));
    }
}
