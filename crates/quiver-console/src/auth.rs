//! Who is at the console: the login token (printed once by `quiver serve`), the signed-in
//! browsers' cookies, and each one's CSRF token.

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::security::same_secret;

/// The cookie that carries a signed-in browser's session.
pub const COOKIE: &str = "qv_console";

/// The operator every console action is recorded under (the holder of the login token).
pub const OPERATOR: &str = "console:owner";

/// The console's secrets and its signed-in browsers.
pub struct Auth {
    token: String,
    secret: Vec<u8>,
    sessions: Mutex<HashSet<String>>,
}

/// How a request proved who it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signed {
    /// A browser's cookie (state changes need its CSRF token and a matching `Origin`).
    Cookie(String),
    /// A script's bearer token (no ambient credentials, so no CSRF check).
    Bearer,
}

impl Auth {
    /// The login `token` and a `secret` for CSRF tokens.
    pub fn new(token: String, secret: Vec<u8>) -> Auth {
        Auth {
            token,
            secret,
            sessions: Mutex::new(HashSet::new()),
        }
    }

    /// Whether `presented` is the login token.
    pub fn is_token(&self, presented: &str) -> bool {
        same_secret(presented.trim(), &self.token)
    }

    /// Opens a browser session (after the login token was shown) and returns its cookie value.
    pub fn open_session(&self, id: String) -> String {
        self.sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.clone());
        id
    }

    /// Ends a browser session.
    pub fn close_session(&self, id: &str) {
        self.sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
    }

    /// Who signed the request: its `Authorization: Bearer` token, else its cookie.
    pub fn signed(&self, authorization: Option<&str>, cookie: Option<&str>) -> Option<Signed> {
        if let Some(value) = authorization {
            let token = value
                .strip_prefix("Bearer ")
                .or_else(|| value.strip_prefix("bearer "))?;
            return self.is_token(token).then_some(Signed::Bearer);
        }
        let id = cookie_value(cookie?, COOKIE)?;
        let known = self
            .sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .any(|s| same_secret(s, id));
        known.then(|| Signed::Cookie(id.to_owned()))
    }

    /// The CSRF token of the browser session `id`: an HMAC of it under the console's secret.
    pub fn csrf(&self, id: &str) -> String {
        csrf_token(&self.secret, id)
    }

    /// The bridge token of the browser session `id` for the pages of `package`.
    pub fn bridge(&self, id: &str, package: &str) -> String {
        bridge_token(&self.secret, id, package)
    }
}

/// The hex HMAC-SHA256 under `secret` of `parts`, each ended by a NUL.
fn mac_hex(secret: &[u8], parts: &[&str]) -> String {
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret) else {
        return String::new();
    };
    for part in parts {
        mac.update(part.as_bytes());
        mac.update(b"\0");
    }
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The CSRF token of session `id` under `secret` (hex HMAC-SHA256).
pub fn csrf_token(secret: &[u8], id: &str) -> String {
    mac_hex(secret, &["csrf", id])
}

/// The bridge token of session `id` for the pages of `package` under `secret`: what the
/// console's page hosting that package's page sends with the calls it forwards. It is good for
/// `POST /packages/<package>/bridge/call` only: no other form takes it, and no other
/// package's bridge.
pub fn bridge_token(secret: &[u8], id: &str, package: &str) -> String {
    mac_hex(secret, &["bridge", id, package])
}

/// Whether a state change signed by `signed` carries what it must: nothing more for a bearer
/// token; for a cookie, this console's `Origin` and the token of the form's scope in the
/// form: the bridge token of `bridge`'s package for its bridge call, else the session's CSRF
/// token.
pub fn state_change_allowed(
    secret: &[u8],
    signed: &Signed,
    form_csrf: Option<&str>,
    origin: Option<&str>,
    host: &str,
    bridge: Option<&str>,
) -> bool {
    match signed {
        Signed::Bearer => true,
        Signed::Cookie(id) => {
            let want = match bridge {
                Some(package) => bridge_token(secret, id, package),
                None => csrf_token(secret, id),
            };
            crate::security::origin_matches(origin, host)
                && form_csrf.is_some_and(|t| same_secret(t, &want))
        }
    }
}

/// The value of cookie `name` in a `Cookie` header.
pub fn cookie_value<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.split(';').find_map(|pair| {
        let (key, value) = pair.trim().split_once('=')?;
        (key == name).then_some(value)
    })
}

/// The `Set-Cookie` value of a signed-in session: never readable by scripts, never sent
/// with a request another site starts.
pub fn session_cookie(id: &str) -> String {
    format!("{COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict")
}

/// The `Set-Cookie` value that ends the session in the browser.
pub fn cleared_cookie() -> String {
    format!("{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies() {
        let cases = [
            ("qv_console=abc", Some("abc")),
            ("a=1; qv_console=abc; b=2", Some("abc")),
            ("qv_console_x=abc", None),
            ("", None),
        ];
        for (header, want) in cases {
            assert_eq!(cookie_value(header, COOKIE), want, "{header}");
        }
        assert_eq!(
            session_cookie("x"),
            "qv_console=x; Path=/; HttpOnly; SameSite=Strict"
        );
    }

    #[test]
    fn who_signed() {
        let auth = Auth::new("tok-123".into(), b"secret".to_vec());
        auth.open_session("sess".into());
        let cases = [
            (Some("Bearer tok-123"), None, Some(Signed::Bearer)),
            (Some("Bearer nope"), Some("qv_console=sess"), None),
            (
                None,
                Some("qv_console=sess"),
                Some(Signed::Cookie("sess".into())),
            ),
            (None, Some("qv_console=other"), None),
            (None, None, None),
        ];
        for (authorization, cookie, want) in cases {
            assert_eq!(
                auth.signed(authorization, cookie),
                want,
                "{authorization:?} {cookie:?}"
            );
        }
        auth.close_session("sess");
        assert_eq!(auth.signed(None, Some("qv_console=sess")), None);
    }

    #[test]
    fn state_changes() {
        let secret = b"secret";
        let cookie = Signed::Cookie("sess".into());
        let good = csrf_token(secret, "sess");
        let other = csrf_token(secret, "other");
        let weather = bridge_token(secret, "sess", "weather");
        let notes = bridge_token(secret, "sess", "notes");
        let elsewhere = bridge_token(secret, "other", "weather");
        let host = "127.0.0.1:8932";
        let origin = Some("http://127.0.0.1:8932");
        let w = Some("weather");
        // (who, token, Origin, the bridge of the request) -> allowed
        let cases = [
            (&Signed::Bearer, None, None, None, true),
            (&Signed::Bearer, None, None, w, true),
            (&cookie, Some(good.as_str()), origin, None, true),
            (&cookie, None, origin, None, false),
            (&cookie, Some(other.as_str()), origin, None, false),
            (
                &cookie,
                Some(good.as_str()),
                Some("http://evil.example"),
                None,
                false,
            ),
            (&cookie, Some(good.as_str()), None, None, false),
            // The bridge token opens its own package's bridge, and nothing else.
            (&cookie, Some(weather.as_str()), origin, w, true),
            (&cookie, Some(weather.as_str()), origin, None, false),
            (
                &cookie,
                Some(weather.as_str()),
                origin,
                Some("notes"),
                false,
            ),
            (&cookie, Some(notes.as_str()), origin, w, false),
            (&cookie, Some(elsewhere.as_str()), origin, w, false),
            (&cookie, Some(good.as_str()), origin, w, false),
            (&cookie, Some(weather.as_str()), Some("null"), w, false),
            (&cookie, None, origin, w, false),
        ];
        for (signed, csrf, origin, bridge, want) in cases {
            assert_eq!(
                state_change_allowed(secret, signed, csrf, origin, host, bridge),
                want,
                "{signed:?} {csrf:?} {origin:?} {bridge:?}"
            );
        }
    }
}
