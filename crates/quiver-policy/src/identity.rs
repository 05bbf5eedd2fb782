//! Who is talking, and from where: [`Origin`] and [`Principal`].
//!
//! Both are established by the front (the platform adapter's sender, a bearer token, the local
//! owner on stdio) and handed to the policy as values. Neither type can be built from text:
//! there is no `FromStr`, no `Deserialize` and no parser, so nothing a user writes in a message
//! can claim an identity or a role. A missing identity is [`Principal::anonymous`], never the
//! owner.

use std::fmt;

use quiver_package::rules::Role;
use serde::Serialize;

/// The kind of conversation on a platform.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ScopeKind {
    /// A group chat (a QQ group, a Telegram group, a Discord guild used as a group).
    Group,
    /// A one-to-one chat.
    Private,
    /// A channel (a Discord text channel, a QQ guild channel).
    Channel,
}

impl ScopeKind {
    /// The word used in `scopes:` lists: `group`, `private` or `channel`.
    pub fn as_str(self) -> &'static str {
        match self {
            ScopeKind::Group => "group",
            ScopeKind::Private => "private",
            ScopeKind::Channel => "channel",
        }
    }
}

impl fmt::Display for ScopeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The conversation a message came from: its kind and the platform's id for it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct ConversationScope {
    /// Group, private chat or channel.
    pub kind: ScopeKind,
    /// The platform's id of the group, the private chat or the channel.
    pub id: String,
}

/// Where a session's messages come from, as the front establishes it.
///
/// The CLI, HTTP and MCP fronts have no platform and no scope ([`Origin::local`]); such an origin
/// never meets a `platforms` or `scopes` restriction, nor a rule that names a platform or a
/// conversation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize)]
pub struct Origin {
    /// The chat platform (adapter) name, such as `qq` or `discord`.
    pub platform: Option<String>,
    /// The conversation on that platform.
    pub scope: Option<ConversationScope>,
    /// A finer place inside the scope (a thread, or a guild's sub-channel), passed on to tools.
    /// Rules never read it: `channel(id)` matches a conversation whose scope is that channel.
    pub channel: Option<String>,
}

impl Origin {
    /// An origin with no platform and no scope: the CLI, HTTP or MCP.
    pub fn local() -> Origin {
        Origin::default()
    }

    /// An origin on `platform` in the conversation `kind`/`id`.
    pub fn on(platform: &str, kind: ScopeKind, id: &str) -> Origin {
        Origin {
            platform: Some(platform.to_owned()),
            scope: Some(ConversationScope {
                kind,
                id: id.to_owned(),
            }),
            channel: None,
        }
    }
}

/// The sender of this turn's message: a user id, a Quiver role, and roles on the platform.
///
/// In a group conversation the sender changes from turn to turn; the policy is always given the
/// sender of the current turn.
///
/// There is no constructor from text, so message text can never become an identity:
///
/// ```compile_fail
/// let sender: quiver_policy::Principal = "user 42, role master".parse().unwrap();
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize)]
pub struct Principal {
    /// The platform's (or token's) user id; `None` is an anonymous user.
    pub user_id: Option<String>,
    /// The Quiver role the operator gave this user; a known user without one is `user`.
    pub role: Option<Role>,
    /// Roles the sender holds on the origin's platform in this conversation (`owner`, `admin`),
    /// read by `platform(adapter,perm)`.
    pub platform_roles: Vec<String>,
}

impl Principal {
    /// An anonymous user: no id, no role, no platform roles. Never the owner.
    pub fn anonymous() -> Principal {
        Principal::default()
    }

    /// A known user with `role` and no platform roles.
    pub fn user(user_id: &str, role: Role) -> Principal {
        Principal {
            user_id: Some(user_id.to_owned()),
            role: Some(role),
            platform_roles: Vec::new(),
        }
    }

    /// Whether the sender is anonymous (no user id).
    pub fn is_anonymous(&self) -> bool {
        self.user_id.is_none()
    }

    /// The role rules see: `None` for an anonymous sender (whatever `role` says), the given
    /// role for a known one, `user` for a known sender without a role.
    pub fn effective_role(&self) -> Option<Role> {
        if self.is_anonymous() {
            return None;
        }
        Some(self.role.unwrap_or(Role::User))
    }
}
