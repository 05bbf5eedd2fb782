//! Webhook deliveries: `POST /hooks/<pkg>/<name>` starts a run of the workflow of `pkg` whose
//! trigger is `webhook: {name, secret}`. The request is authenticated by an HMAC-SHA256 of its
//! exact body under the package's secret setting `secret`, sent as
//! `X-Quiver-Signature: sha256=<hex>` (as GitHub's `X-Hub-Signature-256`) and compared in
//! constant time; it needs no bearer token. The body (a JSON object; empty reads as `{}`) is
//! the run's input. An `Idempotency-Key` makes the delivery once: the same key again answers
//! the same run. The delivery and the run are committed together before the run's id is
//! returned; the run is unattended, for [`WEBHOOK_USER`], and the waker is told to drive it.

use hmac::{Hmac, Mac};
use quiver_package::rules::Role;
use quiver_package::workflow::Trigger;
use quiver_policy::Principal;
use quiver_store::workflow::Run;
use quiver_workflow::WorkflowError;
use serde_json::{Value, json};
use sha2::Sha256;

use crate::runtime::{Runtime, WorkflowSteps};

/// The header carrying the body's signature, `sha256=<hex of HMAC-SHA256(secret, body)>`.
pub const SIGNATURE_HEADER: &str = "x-quiver-signature";

/// The user id webhook runs run as (role `user`): it can ask nobody and approves nothing.
pub const WEBHOOK_USER: &str = "webhook";

/// The longest `Idempotency-Key` taken.
const MAX_KEY: usize = 256;

/// One request to a webhook.
#[derive(Debug, Clone, Copy)]
pub struct Delivery<'a> {
    /// The package, `<pkg>` of the path.
    pub package: &'a str,
    /// The hook's name, `<name>` of the path.
    pub name: &'a str,
    /// The `X-Quiver-Signature` header, if sent.
    pub signature: Option<&'a str>,
    /// The `Idempotency-Key` header, if sent.
    pub key: Option<&'a str>,
    /// The body, exactly as received.
    pub body: &'a [u8],
}

/// Why a delivery started no run.
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    /// No workflow of the catalog has this webhook, or its secret setting is not set.
    #[error("no webhook `{0}` is served here")]
    NoHook(String),
    /// The signature is missing, malformed, or not the body's.
    #[error(
        "the request is not signed with the hook's secret: send `X-Quiver-Signature: sha256=<hex of HMAC-SHA256(secret, body)>`"
    )]
    BadSignature,
    /// The body is not a JSON object, or does not fit the workflow's input, or the
    /// `Idempotency-Key` is unusable.
    #[error("{0}")]
    BadInput(String),
    /// The store failed, or no workflow engine runs here.
    #[error("{0}")]
    Failed(String),
}

/// Whether `signature` (`sha256=<hex>`) is the HMAC-SHA256 of `body` under `secret`, compared
/// in constant time.
pub fn signature_matches(secret: &[u8], body: &[u8], signature: &str) -> bool {
    let Some(tag) = signature
        .trim()
        .strip_prefix("sha256=")
        .and_then(decode_hex)
    else {
        return false;
    };
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret) else {
        return false;
    };
    mac.update(body);
    mac.verify_slice(&tag).is_ok()
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

impl Runtime {
    /// The principal webhook runs run with.
    pub fn webhook_principal() -> Principal {
        Principal::user(WEBHOOK_USER, Role::User)
    }

    /// The workflow (`pkg.workflow`) serving webhook `package`/`name`, and its secret's value.
    fn webhook(&self, package: &str, name: &str) -> Option<(String, String)> {
        let catalog = self.catalog();
        let entry = catalog
            .packages()
            .iter()
            .find(|p| !p.shadowed && p.package.id.as_str() == package)?;
        let (workflow, secret) = entry.package.workflows.iter().find_map(|w| {
            w.triggers.iter().find_map(|t| match t {
                Trigger::Webhook(hook) if hook.name == name => Some((w, hook.secret.clone())),
                _ => None,
            })
        })?;
        let value = self
            .config
            .settings
            .get(package)
            .and_then(|s| s.get(&secret))
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty());
        let Some(value) = value else {
            tracing::warn!(hook = %format!("{package}/{name}"), setting = %secret,
                "a webhook whose secret setting is not set is not served");
            return None;
        };
        Some((format!("{package}.{}", workflow.name), value.to_owned()))
    }

    /// Starts the run of one webhook delivery (see the module's doc): the run and whether this
    /// delivery created it (`false`: its `Idempotency-Key` was delivered before).
    pub fn deliver_webhook(&self, delivery: &Delivery<'_>) -> Result<(Run, bool), HookError> {
        let hook = format!("{}/{}", delivery.package, delivery.name);
        let (workflow, secret) = self
            .webhook(delivery.package, delivery.name)
            .ok_or_else(|| HookError::NoHook(hook.clone()))?;
        let signed = delivery
            .signature
            .is_some_and(|s| signature_matches(secret.as_bytes(), delivery.body, s));
        if !signed {
            return Err(HookError::BadSignature);
        }
        let input: Value = if delivery.body.iter().all(u8::is_ascii_whitespace) {
            json!({})
        } else {
            serde_json::from_slice(delivery.body)
                .map_err(|e| HookError::BadInput(format!("the body is not JSON: {e}")))?
        };
        if !input.is_object() {
            return Err(HookError::BadInput("the body is not a JSON object".into()));
        }
        let key = match delivery.key.map(str::trim) {
            Some(key) if key.is_empty() || key.len() > MAX_KEY => {
                return Err(HookError::BadInput(format!(
                    "`Idempotency-Key` must have 1 to {MAX_KEY} characters"
                )));
            }
            Some(key) => key.to_owned(),
            None => format!("unkeyed:{}", crate::ids::new_id("delivery")),
        };
        let definition = self
            .workflow_definition(&workflow)
            .ok_or_else(|| HookError::NoHook(hook.clone()))?;
        let steps = WorkflowSteps::new(self);
        let engine = self
            .workflow_engine(&steps)
            .ok_or_else(|| HookError::Failed("no workflow engine runs here".into()))?;
        let start = self.run_start(
            delivery.package,
            &Runtime::webhook_principal(),
            input,
            json!({"kind": "webhook", "hook": hook, "delivery": key}),
            false,
            None,
        );
        let started = engine
            .pin(&definition)
            .and_then(|digest| engine.deliver(&digest, &hook, &key, &start));
        let (run, created) = started.map_err(|e| match e {
            WorkflowError::Refused(why) => HookError::BadInput(why),
            other => HookError::Failed(other.to_string()),
        })?;
        if created && !self.wake_run(&run.id) {
            tracing::warn!(run = %run.id, "a webhook run was started but nothing here drives runs");
        }
        Ok((run, created))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures() {
        // RFC 4231 test case 2 key and data.
        let (key, body) = (
            b"Jefe".as_slice(),
            b"what do ya want for nothing?".as_slice(),
        );
        let good = "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843";
        let cases = [
            (good, true),
            (
                &good.to_uppercase().replace("SHA256=", "sha256=") as &str,
                true,
            ),
            (
                "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3844",
                false,
            ),
            ("sha256=5bdc", false),
            ("sha256=zz", false),
            ("sha256=5", false),
            (
                "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
                false,
            ),
            ("", false),
        ];
        for (signature, want) in cases {
            assert_eq!(signature_matches(key, body, signature), want, "{signature}");
        }
        assert!(!signature_matches(b"other", body, good));
    }
}
