//! What `quiver serve` takes from the host for its MCP front: the `mcp:` settings with the
//! command line's choices applied, and the owner's bearer token joined to them.

use std::path::Path;

use quiver_mcp::McpConfig;
use quiver_mcp::config::BearerToken;
use quiver_mcp::owner_token::OwnerToken;
use quiver_policy::Origin;

use crate::{Config, HostError};

/// How the MCP front is served.
#[derive(Debug, Clone, Copy)]
pub struct Serving {
    /// Over stdio (the local owner) rather than HTTP.
    pub stdio: bool,
    /// `--allow-anonymous`: HTTP requests without a token are served, as an anonymous user.
    pub allow_anonymous: bool,
}

/// The MCP front's settings for one `serve`.
#[derive(Debug)]
pub struct McpFront {
    /// The settings, tokens resolved.
    pub config: McpConfig,
    /// Over HTTP without anonymous access: the owner's token (made at the first start, kept
    /// beside the state database), standing for the stdio principal.
    pub owner_token: Option<OwnerToken>,
}

/// The front's settings from `config`'s `mcp:` section (token variables read from the
/// environment) and `serving`; over HTTP without anonymous access the owner's token joins the
/// configured ones.
pub fn mcp_front(
    config: &Config,
    state_db: &Path,
    serving: Serving,
) -> Result<McpFront, HostError> {
    let mut mcp = config.mcp(&|name| std::env::var(name).ok())?;
    mcp.allow_anonymous |= serving.allow_anonymous;
    if serving.stdio || mcp.allow_anonymous {
        return Ok(McpFront {
            config: mcp,
            owner_token: None,
        });
    }
    let dir = state_db.parent().unwrap_or_else(|| Path::new("."));
    let token = quiver_mcp::owner_token::load_or_create(dir).map_err(|e| HostError::Secret {
        path: dir.join(quiver_mcp::owner_token::TOKEN_FILE),
        why: e.to_string(),
    })?;
    mcp.tokens.push(BearerToken {
        token: token.token.clone(),
        principal: mcp.stdio_principal.clone(),
        origin: Origin::default(),
    });
    Ok(McpFront {
        config: mcp,
        owner_token: Some(token),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The owner's token is made only for HTTP without anonymous access, and then stands for
    /// the stdio principal.
    #[test]
    fn the_owner_token_joins_only_an_http_front_that_needs_tokens() {
        let cases = [
            (
                Serving {
                    stdio: true,
                    allow_anonymous: false,
                },
                false,
            ),
            (
                Serving {
                    stdio: false,
                    allow_anonymous: true,
                },
                false,
            ),
            (
                Serving {
                    stdio: false,
                    allow_anonymous: false,
                },
                true,
            ),
        ];
        for (serving, made) in cases {
            let dir = tempfile::tempdir().unwrap();
            let front =
                mcp_front(&Config::default(), &dir.path().join("state.db"), serving).unwrap();
            assert_eq!(front.owner_token.is_some(), made, "{serving:?}");
            assert_eq!(front.config.tokens.len(), usize::from(made), "{serving:?}");
            assert_eq!(front.config.allow_anonymous, serving.allow_anonymous);
            if let Some(token) = &front.owner_token {
                let principal = front.config.principal_for_token(&token.token).unwrap();
                assert_eq!(principal, &front.config.stdio_principal);
            }
        }
    }
}
