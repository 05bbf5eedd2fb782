//! Webhook deliveries: `POST /hooks/<pkg>/<name>` starts a run of the workflow of `pkg` whose
//! trigger is `webhook: {name, secret}`. The request is authenticated by an HMAC-SHA256 under
//! the package's secret setting `secret` of `<timestamp>.<Idempotency-Key>.<body>` (the key
//! empty when none is sent), sent as `X-Quiver-Signature: sha256=<hex>` with the Unix time in
//! seconds as `X-Quiver-Timestamp`, compared in constant time; it needs no bearer token.
//! Exactly one of each header is taken, and a timestamp more than [`REPLAY_WINDOW`] away from
//! now is refused, so a captured delivery cannot be replayed later; within the window a replay
//! is the same delivery (an unkeyed delivery is keyed by its signature), answered with the
//! same run. A refused signature is audited (`webhook_refused`). The body (a JSON object;
//! empty reads as `{}`) is the run's input. The delivery and the run are committed together
//! before the run's id is returned; the run is unattended, for [`WEBHOOK_USER`], and the waker
//! is told to drive it.

use hmac::{Hmac, Mac};
use quiver_package::rules::Role;
use quiver_package::workflow::Trigger;
use quiver_policy::Principal;
use quiver_store::workflow::Run;
use quiver_store::{AuditDecision, AuditEntry, AuditKind, AuditStatus, AuditStep};
use quiver_workflow::WorkflowError;
use serde_json::{Value, json};
use sha2::Sha256;

use crate::runtime::{Runtime, WorkflowSteps};

/// The header carrying the delivery's signature, `sha256=<hex of HMAC-SHA256(secret,
/// "<timestamp>.<Idempotency-Key>.<body>")>`.
pub const SIGNATURE_HEADER: &str = "x-quiver-signature";

/// The header carrying the time the delivery was signed, in Unix seconds.
pub const TIMESTAMP_HEADER: &str = "x-quiver-timestamp";

/// How far a delivery's timestamp may be from now, either way.
pub const REPLAY_WINDOW: std::time::Duration = std::time::Duration::from_secs(300);

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
    /// Every `X-Quiver-Signature` header sent (exactly one is taken).
    pub signatures: &'a [&'a str],
    /// Every `X-Quiver-Timestamp` header sent (exactly one is taken).
    pub timestamps: &'a [&'a str],
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
    /// The signature or its timestamp is missing, repeated, malformed, out of the replay
    /// window, or not the delivery's.
    #[error(
        "the request is not signed with the hook's secret ({0}): send one `X-Quiver-Timestamp: <Unix seconds>` and one `X-Quiver-Signature: sha256=<hex of HMAC-SHA256(secret, \"<timestamp>.<Idempotency-Key>.<body>\")>`"
    )]
    BadSignature(String),
    /// The body is not a JSON object, or does not fit the workflow's input, or the
    /// `Idempotency-Key` is unusable.
    #[error("{0}")]
    BadInput(String),
    /// The store failed, or no workflow engine runs here.
    #[error("{0}")]
    Failed(String),
}

/// Whether `delivery` is signed with `secret` at a time within [`REPLAY_WINDOW`] of `now`
/// (Unix seconds); `Err` says why not.
pub fn check_signature(secret: &[u8], delivery: &Delivery<'_>, now: i64) -> Result<(), String> {
    let one = |values: &[&str], header: &str| match values {
        [] => Err(format!("no `{header}` header")),
        [value] => Ok(value.trim().to_owned()),
        _ => Err(format!("`{header}` is sent more than once")),
    };
    let signature = one(delivery.signatures, "X-Quiver-Signature")?;
    let timestamp = one(delivery.timestamps, "X-Quiver-Timestamp")?;
    let at: i64 = timestamp
        .parse()
        .map_err(|_| format!("`X-Quiver-Timestamp` is not Unix seconds: `{timestamp}`"))?;
    let window = i64::try_from(REPLAY_WINDOW.as_secs()).unwrap_or(i64::MAX);
    if now.abs_diff(at) > window.unsigned_abs() {
        return Err(format!(
            "the timestamp is more than {window} s from now: a replay, or a clock that is off"
        ));
    }
    let mut signed = format!("{timestamp}.{}.", delivery.key.unwrap_or_default()).into_bytes();
    signed.extend_from_slice(delivery.body);
    if signature_matches(secret, &signed, &signature) {
        Ok(())
    } else {
        Err("the signature is not the delivery's".into())
    }
}

/// Whether `signature` (`sha256=<hex>`) is the HMAC-SHA256 of `signed` under `secret`,
/// compared in constant time.
pub fn signature_matches(secret: &[u8], signed: &[u8], signature: &str) -> bool {
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
    mac.update(signed);
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
        let now = chrono::Utc::now().timestamp();
        if let Err(why) = check_signature(secret.as_bytes(), delivery, now) {
            self.audit_refused_delivery(&hook, &workflow, delivery, &why);
            return Err(HookError::BadSignature(why));
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
            // A replay within the window is the same delivery.
            None => format!("signed:{}", delivery.signatures.concat().trim()),
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

impl Runtime {
    /// Records a delivery refused for its signature (forged, replayed, tampered): the hook,
    /// the workflow, why, and the body's size (never the body).
    fn audit_refused_delivery(
        &self,
        hook: &str,
        workflow: &str,
        delivery: &Delivery<'_>,
        why: &str,
    ) {
        let mut entry = AuditEntry::new(
            AuditKind::Other("webhook_refused".into()),
            format!("hook:{hook}"),
        );
        entry.origin = json!({"webhook": hook});
        entry.tool = Some(workflow.to_owned());
        entry.status = AuditStatus::Refused;
        entry.decisions.push(AuditDecision {
            step: AuditStep::Signature,
            decision: "refuse".into(),
            reason: why.to_owned(),
        });
        entry.detail =
            Some(json!({"body_bytes": delivery.body.len(), "idempotency_key": delivery.key}));
        if let Err(e) = self.store.append_audit(&entry) {
            tracing::warn!(hook, "cannot record a refused delivery: {e}");
        }
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

    fn sign(secret: &[u8], text: &str) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret).unwrap();
        mac.update(text.as_bytes());
        let tag = mac.finalize().into_bytes();
        format!(
            "sha256={}",
            tag.iter().map(|b| format!("{b:02x}")).collect::<String>()
        )
    }

    #[test]
    fn a_delivery_is_signed_once_with_its_time_and_key() {
        let secret = b"s3cret";
        let now = 1_800_000_000;
        let good = sign(secret, "1800000000.k1.{}");
        let other = sign(secret, "1800000000.k1.{\"x\":1}");
        let old = sign(secret, "1799999000.k1.{}");
        let unkeyed = sign(secret, "1800000000..{}");
        // (signatures, timestamps, key, what is wanted)
        type Case<'a> = (
            &'a [&'a str],
            &'a [&'a str],
            Option<&'a str>,
            Result<(), &'a str>,
        );
        let cases: [Case<'_>; 9] = [
            (&[&good], &["1800000000"], Some("k1"), Ok(())),
            (&[&unkeyed], &["1800000000"], None, Ok(())),
            // Another key (a replay under a new Idempotency-Key) breaks the signature.
            (
                &[&good],
                &["1800000000"],
                Some("k2"),
                Err("not the delivery's"),
            ),
            (&[&old], &["1799999000"], Some("k1"), Err("more than 300 s")),
            (
                &[&good],
                &["1799999000"],
                Some("k1"),
                Err("more than 300 s"),
            ),
            (
                &[],
                &["1800000000"],
                Some("k1"),
                Err("no `X-Quiver-Signature`"),
            ),
            (&[&good], &[], Some("k1"), Err("no `X-Quiver-Timestamp`")),
            (
                &[&good, &other],
                &["1800000000"],
                Some("k1"),
                Err("more than once"),
            ),
            (&[&good], &["soon"], Some("k1"), Err("not Unix seconds")),
        ];
        for (signatures, timestamps, key, want) in cases {
            let delivery = Delivery {
                package: "p",
                name: "h",
                signatures,
                timestamps,
                key,
                body: b"{}",
            };
            let got = check_signature(secret, &delivery, now);
            match (got, want) {
                (Ok(()), Ok(())) => {}
                (Err(e), Err(w)) => assert!(e.contains(w), "{signatures:?} {timestamps:?}: {e}"),
                (got, want) => {
                    panic!("{signatures:?} {timestamps:?} {key:?}: {got:?}, want {want:?}")
                }
            }
        }
    }
}
