//! The `mcp:` section of Quiver's config file: who a caller is on each transport.
//!
//! ```yaml
//! mcp:
//!   stdio: { user: local, role: master }     # the default: stdio is the local owner
//!   http:
//!     allowed_origins: ["http://localhost:*"]
//!     anonymous: false                          # the default; true serves requests without a token
//!                                               # as an anonymous user (never the owner)
//!   tokens:
//!     - { token_env: QUIVER_TOKEN_ALICE, user: alice, role: trusted }
//!     - { token: "s3cret-for-bob", user: bob, role: user }
//!     - { token_env: QUIVER_TOKEN_OPS, user: ops, role: user, platform: qq, platform_roles: [admin] }
//!   approval_wait: 60                           # seconds a question the policy routes to an
//!                                               # operator (the console queue) waits
//!   conversation_idle: 86400                    # seconds without a request before a
//!                                               # conversation is deleted (default one day)
//! ```

use std::time::Duration;

use quiver_package::rules::Role;
use quiver_policy::{Origin, Principal};
use serde::Deserialize;

/// A configuration problem.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A role name that is not `master`, `trusted` or `user`.
    #[error("unknown role `{0}` in the `mcp` section; use master, trusted or user")]
    UnknownRole(String),
    /// A token names an environment variable that is not set.
    #[error("token for `{user}` reads `${var}`, which is not set")]
    MissingTokenEnv {
        /// The token's user.
        user: String,
        /// The variable.
        var: String,
    },
    /// A token without a value.
    #[error("token for `{0}` has neither `token` nor `token_env`")]
    EmptyToken(String),
    /// `platform_roles` without the `platform` they hold on.
    #[error("token for `{0}` has `platform_roles` but no `platform`")]
    RolesWithoutPlatform(String),
}

/// The `mcp:` section as written, checked for its shape when the config file is read
/// (`quiver-host` parses the whole file once); [`McpConfig::from_section`] resolves it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpSection {
    #[serde(default)]
    stdio: Option<PrincipalEntry>,
    #[serde(default)]
    http: Option<HttpEntry>,
    #[serde(default)]
    tokens: Vec<TokenEntry>,
    #[serde(default)]
    approval_wait: Option<u64>,
    conversation_idle: Option<u64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct PrincipalEntry {
    user: Option<String>,
    role: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct HttpEntry {
    #[serde(default)]
    allowed_origins: Option<Vec<String>>,
    #[serde(default)]
    anonymous: Option<bool>,
}

#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenEntry {
    token: Option<String>,
    token_env: Option<String>,
    user: String,
    role: Option<String>,
    /// The platform (adapter) the token's conversations count as on, for `platform(...)`.
    #[serde(default)]
    platform: Option<String>,
    /// The sender's roles on that platform (`owner`, `admin`).
    #[serde(default)]
    platform_roles: Vec<String>,
}

impl std::fmt::Debug for TokenEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenEntry")
            .field("token_env", &self.token_env)
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

/// A bearer token and the principal it stands for.
#[derive(Clone)]
pub struct BearerToken {
    /// The secret.
    pub token: String,
    /// Who presents it.
    pub principal: Principal,
    /// Where its conversations come from: no platform, unless the token names one (so
    /// `platform(adapter,perm)` rules can hold for its `platform_roles`).
    pub origin: Origin,
}

impl std::fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BearerToken")
            .field("principal", &self.principal)
            .finish_non_exhaustive()
    }
}

/// The front's identity and safety settings.
#[derive(Debug, Clone)]
pub struct McpConfig {
    /// Who a stdio client is (default: the local owner, `local` with role `master`).
    pub stdio_principal: Principal,
    /// Bearer tokens accepted over HTTP.
    pub tokens: Vec<BearerToken>,
    /// Whether an HTTP request without a token is served (as an anonymous user).
    pub allow_anonymous: bool,
    /// Browser origins allowed to call over HTTP (requests without `Origin` always pass).
    pub allowed_origins: Vec<String>,
    /// How long a question the policy routes to an operator waits in the console queue, and a
    /// question shown as its console page through URL-mode elicitation waits for the person
    /// (a person's question to a client that cannot elicit never waits: it is answered at once
    /// with where to answer it, and the client's retry finds the answer).
    pub approval_wait: Duration,
    /// How long an HTTP connection may take to send a request's headers (default 10 s).
    pub header_timeout: Duration,
    /// How long a conversation may go without a request before it is deleted with what it
    /// holds (default one day): a stateless request that never comes back leaves no row.
    pub conversation_idle: Duration,
    /// How long a conversation a stateless request started without a handle is kept when no
    /// request names it again (default ten minutes; not read from the file).
    pub provisional_idle: Duration,
    /// The web console's address (`http://127.0.0.1:8932`) when `quiver serve` runs it: a
    /// client that cannot show a question is given the card's own page there (not read
    /// from the file).
    pub console_url: Option<String>,
}

impl Default for McpConfig {
    fn default() -> Self {
        McpConfig {
            stdio_principal: Principal::user("local", Role::Master),
            tokens: Vec::new(),
            allow_anonymous: false,
            allowed_origins: vec![
                "http://localhost:*".into(),
                "http://127.0.0.1:*".into(),
                "http://[::1]:*".into(),
            ],
            approval_wait: Duration::from_secs(60),
            header_timeout: Duration::from_secs(10),
            conversation_idle: Duration::from_secs(24 * 60 * 60),
            provisional_idle: Duration::from_secs(10 * 60),
            console_url: None,
        }
    }
}

fn role(name: Option<&str>) -> Result<Role, ConfigError> {
    let name = name.unwrap_or("user");
    Role::parse(name).ok_or_else(|| ConfigError::UnknownRole(name.to_owned()))
}

impl McpConfig {
    /// The settings of the config file's `mcp:` section (the defaults when there is none);
    /// `env` looks up `token_env` variables.
    pub fn from_section(
        section: Option<&McpSection>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<McpConfig, ConfigError> {
        let mut config = McpConfig::default();
        let Some(file) = section.cloned() else {
            return Ok(config);
        };
        if let Some(stdio) = file.stdio {
            config.stdio_principal = Principal::user(
                stdio.user.as_deref().unwrap_or("local"),
                role(Some(stdio.role.as_deref().unwrap_or("master")))?,
            );
        }
        if let Some(http) = file.http {
            if let Some(origins) = http.allowed_origins {
                config.allowed_origins = origins;
            }
            if let Some(anonymous) = http.anonymous {
                config.allow_anonymous = anonymous;
            }
        }
        for entry in file.tokens {
            let token = match (entry.token, entry.token_env) {
                (Some(token), _) => token,
                (None, Some(var)) => env(&var).ok_or_else(|| ConfigError::MissingTokenEnv {
                    user: entry.user.clone(),
                    var: var.clone(),
                })?,
                (None, None) => return Err(ConfigError::EmptyToken(entry.user)),
            };
            if token.is_empty() {
                return Err(ConfigError::EmptyToken(entry.user));
            }
            if entry.platform.is_none() && !entry.platform_roles.is_empty() {
                return Err(ConfigError::RolesWithoutPlatform(entry.user));
            }
            let mut principal = Principal::user(&entry.user, role(entry.role.as_deref())?);
            principal.platform_roles = entry.platform_roles;
            let origin = Origin {
                platform: entry.platform,
                ..Origin::default()
            };
            config.tokens.push(BearerToken {
                token,
                principal,
                origin,
            });
        }
        if let Some(secs) = file.conversation_idle {
            config.conversation_idle = Duration::from_secs(secs.max(60));
        }
        if let Some(secs) = file.approval_wait {
            config.approval_wait = Duration::from_secs(secs);
        }
        Ok(config)
    }

    /// The principal a bearer token stands for, compared in constant time.
    pub fn principal_for_token(&self, presented: &str) -> Option<&Principal> {
        self.token(presented).map(|t| &t.principal)
    }

    /// The configured token equal to `presented`, compared in constant time.
    pub fn token(&self, presented: &str) -> Option<&BearerToken> {
        self.tokens
            .iter()
            .find(|t| constant_time_eq(t.token.as_bytes(), presented.as_bytes()))
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `mcp:` section of a whole config file's text, as the host reads it.
    fn from_text(
        text: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<McpConfig, ConfigError> {
        #[derive(Deserialize)]
        struct Whole {
            mcp: Option<McpSection>,
        }
        let whole: Whole = serde_saphyr::from_str(text).unwrap();
        McpConfig::from_section(whole.mcp.as_ref(), env)
    }

    #[test]
    fn reads_the_mcp_section() {
        let text = r#"
roots: [{path: /tmp/x}]
mcp:
  stdio: {user: me, role: trusted}
  http: {allowed_origins: ["https://app.example:443"], anonymous: false}
  tokens:
    - {token: abc, user: bob}
    - {token_env: ALICE_TOKEN, user: alice, role: master}
    - {token: qqq, user: ops, platform: qq, platform_roles: [admin, owner]}
  approval_wait: 5
"#;
        let env = |name: &str| (name == "ALICE_TOKEN").then(|| "xyz".to_owned());
        let config = from_text(text, &env).unwrap();
        assert_eq!(config.stdio_principal, Principal::user("me", Role::Trusted));
        assert!(!config.allow_anonymous);
        assert_eq!(config.allowed_origins, vec!["https://app.example:443"]);
        assert_eq!(
            config.principal_for_token("abc"),
            Some(&Principal::user("bob", Role::User))
        );
        assert_eq!(
            config.principal_for_token("xyz"),
            Some(&Principal::user("alice", Role::Master))
        );
        assert_eq!(config.principal_for_token("ab"), None);
        assert_eq!(config.approval_wait, Duration::from_secs(5));
        let admin = config.token("qqq").unwrap();
        assert_eq!(admin.origin.platform.as_deref(), Some("qq"));
        assert_eq!(admin.principal.platform_roles, vec!["admin", "owner"]);
        assert_eq!(config.token("abc").unwrap().origin, Origin::default());
    }

    #[test]
    fn tokens_are_required_unless_anonymous_is_chosen() {
        let env = |_: &str| None;
        let cases = [
            ("roots: []", false),
            ("mcp: {http: {anonymous: true}}", true),
            ("mcp: {http: {anonymous: false}}", false),
        ];
        for (text, anonymous) in cases {
            let config = from_text(text, &env).unwrap();
            assert_eq!(config.allow_anonymous, anonymous, "{text}");
        }
    }

    #[test]
    fn bad_sections_are_clear_errors() {
        let env = |_: &str| None;
        let cases = [
            (
                "mcp: {tokens: [{user: a}]}",
                "neither `token` nor `token_env`",
            ),
            (
                "mcp: {tokens: [{token_env: NOPE, user: a}]}",
                "reads `$NOPE`",
            ),
            ("mcp: {stdio: {role: king}}", "unknown role `king`"),
            (
                "mcp: {tokens: [{token: t, user: a, platform_roles: [admin]}]}",
                "no `platform`",
            ),
        ];
        for (text, want) in cases {
            let err = from_text(text, &env).unwrap_err().to_string();
            assert!(err.contains(want), "{text}: {err}");
        }
        let none = from_text("roots: []", &env).unwrap();
        assert_eq!(none.stdio_principal, Principal::user("local", Role::Master));
    }
}
