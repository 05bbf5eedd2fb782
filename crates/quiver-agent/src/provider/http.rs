//! One HTTP client per provider: the key from its environment variable, a timeout, and
//! retries with exponential backoff on 429, 5xx and failed connections.

use std::time::Duration;

use reqwest::blocking::Response;
use serde_json::Value;

use super::ProviderError;
use crate::config::ProviderConfig;

/// Longest wait between retries, whatever `Retry-After` says.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// A provider's HTTP client.
pub struct Client {
    http: reqwest::blocking::Client,
    /// The configuration it was built from.
    pub config: ProviderConfig,
    key: Option<String>,
}

impl Client {
    /// A client for `config`; its key variable must be set when it names one.
    pub fn new(config: &ProviderConfig) -> Result<Client, ProviderError> {
        // Only the ring provider is built in; installing it twice is harmless.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let key = match &config.api_key_env {
            Some(var) => Some(
                std::env::var(var)
                    .ok()
                    .filter(|k| !k.trim().is_empty())
                    .ok_or_else(|| ProviderError::MissingKey(var.clone()))?,
            ),
            None => None,
        };
        let http = reqwest::blocking::Client::builder()
            .timeout(config.timeout())
            .connect_timeout(config.timeout())
            .build()
            .map_err(|e| ProviderError::Connect {
                url: config.base_url.clone(),
                message: e.to_string(),
            })?;
        Ok(Client {
            http,
            config: config.clone(),
            key,
        })
    }

    /// The API key, when one is configured.
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// `base_url` joined with `path`.
    pub fn url(&self, path: &str) -> String {
        format!(
            "{}/{}",
            self.config.base_url.trim_end_matches('/'),
            path.trim_start_matches('/')
        )
    }

    /// POSTs `body` as JSON to `url` with `headers`, retrying 429, 5xx and connection
    /// failures; any other error status is returned at once with the server's message.
    pub fn post(
        &self,
        url: &str,
        headers: &[(&str, String)],
        body: &Value,
    ) -> Result<Response, ProviderError> {
        let mut attempt = 0u32;
        loop {
            let mut request = self.http.post(url).json(body);
            for (name, value) in headers {
                request = request.header(*name, value);
            }
            for (name, value) in &self.config.headers {
                request = request.header(name, value);
            }
            let retry_after;
            let error = match request.send() {
                Ok(response) if response.status().is_success() => return Ok(response),
                Ok(response) => {
                    let status = response.status().as_u16();
                    retry_after = response
                        .headers()
                        .get("retry-after")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.trim().parse::<f64>().ok())
                        .map(|s| Duration::from_secs_f64(s.clamp(0.0, 3600.0)));
                    let text = response.text().unwrap_or_default();
                    let error = ProviderError::Status {
                        url: url.to_owned(),
                        status,
                        message: error_message(&text),
                    };
                    if !(status == 429 || status >= 500) {
                        return Err(error);
                    }
                    error
                }
                Err(e) => {
                    retry_after = None;
                    self.send_error(url, &e)
                }
            };
            if attempt >= self.config.max_retries {
                return Err(error);
            }
            let backoff = retry_after.unwrap_or_else(|| {
                Duration::from_millis(
                    self.config
                        .retry_backoff_ms
                        .saturating_mul(1 << attempt.min(16)),
                )
            });
            tracing::warn!(%error, attempt, ?backoff, "retrying the model request");
            std::thread::sleep(backoff.min(MAX_BACKOFF));
            attempt += 1;
        }
    }

    /// The error for a request that got no answer.
    pub fn send_error(&self, url: &str, e: &reqwest::Error) -> ProviderError {
        if e.is_timeout() {
            ProviderError::Timeout {
                url: url.to_owned(),
                seconds: self.config.timeout,
            }
        } else {
            ProviderError::Connect {
                url: url.to_owned(),
                message: chain(e),
            }
        }
    }
}

/// An error and its causes, joined.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// The message of an error body: `error.message`, `message`, `error` as text, or the body.
fn error_message(body: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let found = parsed.as_ref().and_then(|v| {
        v.pointer("/error/message")
            .or_else(|| v.get("message"))
            .or_else(|| v.get("error"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    let text = found.unwrap_or_else(|| body.trim().to_owned());
    let mut short: String = text.chars().take(500).collect();
    if short.is_empty() {
        short = "(no message)".into();
    }
    short
}

/// Reads a timeout or a broken stream while reading an answer as the matching error.
pub fn read_error(client: &Client, url: &str, e: &std::io::Error) -> ProviderError {
    let timed_out =
        e.kind() == std::io::ErrorKind::TimedOut || chain(e).to_lowercase().contains("timed out");
    if timed_out {
        ProviderError::Timeout {
            url: url.to_owned(),
            seconds: client.config.timeout,
        }
    } else {
        ProviderError::Malformed {
            url: url.to_owned(),
            message: format!("the stream broke: {}", chain(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_messages_come_from_any_shape() {
        let cases: &[(&str, &str)] = &[
            (
                r#"{"error":{"message":"rate limited","type":"x"}}"#,
                "rate limited",
            ),
            (r#"{"message":"bad model"}"#, "bad model"),
            (r#"{"error":"overloaded"}"#, "overloaded"),
            ("upstream timeout", "upstream timeout"),
            ("", "(no message)"),
        ];
        for (body, want) in cases {
            assert_eq!(error_message(body), *want);
        }
    }
}
