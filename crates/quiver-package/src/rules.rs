//! Permission rules (`permissions:` lists): parsed here, evaluated by the policy crate.
//!
//! `adapter(name)`, `group(id,...)`, `private(id,...)`, `channel(id,...)`, `user(id,...)`,
//! `role(master|trusted|user)`, `platform(adapter,perm)`. Commas inside one rule mean any of;
//! `*` is a wildcard.

use serde::Serialize;

/// One parsed permission rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "rule", content = "args", rename_all = "lowercase")]
pub enum Rule {
    /// The conversation comes through one of these adapters (platforms).
    Adapter(Vec<String>),
    /// The conversation is one of these groups.
    Group(Vec<String>),
    /// The conversation is a private chat with one of these ids.
    Private(Vec<String>),
    /// The conversation is one of these channels.
    Channel(Vec<String>),
    /// The sender is one of these users.
    User(Vec<String>),
    /// The sender has at least this role.
    Role(Role),
    /// The sender holds `perm` (owner, admin, ...) on `adapter`.
    Platform {
        /// The adapter (platform) name.
        adapter: String,
        /// The platform role or permission.
        perm: String,
    },
}

/// A principal's role; `master` implies `trusted` implies `user`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Any known user.
    User,
    /// A trusted user.
    Trusted,
    /// The owner.
    Master,
}

impl Role {
    /// Parses `master`, `trusted` or `user`.
    pub fn parse(text: &str) -> Option<Role> {
        match text {
            "master" => Some(Role::Master),
            "trusted" => Some(Role::Trusted),
            "user" => Some(Role::User),
            _ => None,
        }
    }
}

/// Parses one rule such as `group(123,456)`.
pub fn parse_rule(text: &str) -> Result<Rule, String> {
    let text = text.trim();
    let (head, rest) = text
        .split_once('(')
        .ok_or_else(|| format!("`{text}` is not a rule of the form `name(args)`"))?;
    let args = rest
        .strip_suffix(')')
        .ok_or_else(|| format!("`{text}` is missing its closing `)`"))?;
    let args: Vec<String> = args.split(',').map(|a| a.trim().to_owned()).collect();
    if args.iter().any(String::is_empty) {
        return Err(format!("`{text}` has an empty argument"));
    }
    match head.trim() {
        "adapter" => Ok(Rule::Adapter(args)),
        "group" => Ok(Rule::Group(args)),
        "private" => Ok(Rule::Private(args)),
        "channel" => Ok(Rule::Channel(args)),
        "user" => Ok(Rule::User(args)),
        "role" => match args.as_slice() {
            [one] => Role::parse(one)
                .map(Rule::Role)
                .ok_or_else(|| format!("`{text}`: the role must be `master`, `trusted` or `user`")),
            _ => Err(format!("`{text}`: `role` takes exactly one role")),
        },
        "platform" => match args.as_slice() {
            [adapter, perm] => Ok(Rule::Platform {
                adapter: adapter.clone(),
                perm: perm.clone(),
            }),
            _ => Err(format!(
                "`{text}`: `platform` takes an adapter and a permission"
            )),
        },
        other => Err(format!("`{other}` is not a known permission rule")),
    }
}

/// Checks that `text` parses as a rule.
pub fn check_rule(text: &str) -> Result<(), String> {
    parse_rule(text).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules() {
        let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let cases: &[(&str, Result<Rule, ()>)] = &[
            ("group(1, 2)", Ok(Rule::Group(s(&["1", "2"])))),
            ("adapter(qq)", Ok(Rule::Adapter(s(&["qq"])))),
            ("user(*)", Ok(Rule::User(s(&["*"])))),
            ("role(trusted)", Ok(Rule::Role(Role::Trusted))),
            (
                "platform(qq,admin)",
                Ok(Rule::Platform {
                    adapter: "qq".into(),
                    perm: "admin".into(),
                }),
            ),
            ("role(god)", Err(())),
            ("role(user,master)", Err(())),
            ("platform(qq)", Err(())),
            ("group()", Err(())),
            ("group(1", Err(())),
            ("group", Err(())),
            ("wizard(1)", Err(())),
        ];
        for (text, want) in cases {
            assert_eq!(parse_rule(text).map_err(|_| ()), *want, "{text}");
        }
        assert!(Role::Master > Role::Trusted && Role::Trusted > Role::User);
    }
}
