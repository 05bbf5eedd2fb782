//! `quiver call`, `quiver session` and `quiver audit`: the runtime from the command line.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use quiver_host::{Host, HostOptions};
use quiver_package::rules::Role;
use quiver_policy::{ConversationScope, Origin, Principal, ScopeKind};
use quiver_runtime::admin::Admin;
use quiver_runtime::approver::{Approver, TerminalApprover};
use quiver_runtime::{ApproverSet, CallStatus, Profile, SessionRequest};
use quiver_store::{AuditQuery, SessionFilter, SessionStatus};
use serde_json::{Value, json};

use crate::roots::RootArgs;

/// Where the state database lives.
#[derive(Debug, Clone, clap::Args)]
pub struct StateArgs {
    /// The SQLite database (default: `state.db` in Quiver's state folder).
    #[arg(long, value_name = "PATH", global = true)]
    pub db: Option<PathBuf>,
    /// The PostgreSQL database holding the state (`postgres://user@host:port/db`), which
    /// several `quiver serve` instances share (default: the config file's `database:`, else
    /// the SQLite file).
    #[arg(long, value_name = "URL", global = true, conflicts_with = "db")]
    pub database: Option<String>,
}

impl StateArgs {
    pub(crate) fn state(&self) -> miette::Result<quiver_host::State> {
        // Only `database:` is read here: the caller reports the config's warnings.
        let config = quiver_host::Config::load().map_err(crate::roots::fail)?;
        self.state_with(&config)
    }

    /// The state: `--database`, else `--db`, else the config's `database:`, else the SQLite
    /// file in the state folder.
    pub(crate) fn state_with(
        &self,
        config: &quiver_host::Config,
    ) -> miette::Result<quiver_host::State> {
        let database = match (&self.database, &self.db) {
            (Some(url), _) => Some(url.as_str()),
            (None, Some(_)) => None,
            (None, None) => config.database.as_deref(),
        };
        match database {
            Some(url) if quiver_store::is_postgres_url(url) => {
                quiver_host::State::open_postgres(url).map_err(crate::roots::fail)
            }
            Some(_) => Err(miette::miette!(
                "`--database` must be a PostgreSQL URL (`postgres://user@host:port/db`); \
                 use `--db PATH` for an SQLite file"
            )),
            None => quiver_host::State::open(self.db.as_deref()).map_err(crate::roots::fail),
        }
    }

    /// The operator's door to the state ([`quiver_runtime::admin::Admin`]).
    pub(crate) fn admin(&self) -> miette::Result<Admin> {
        Ok(self.state()?.admin())
    }
}

/// Arguments of `quiver call`.
#[derive(Debug, clap::Args)]
pub struct CallArgs {
    /// The tool: a wire name (`weather__forecast`), a qualified name (`weather.forecast`) or a
    /// meta-tool (`read_skill`, `tool_search`).
    pub tool: String,
    /// The arguments, as a JSON object.
    #[arg(long, default_value = "{}")]
    pub args: String,
    #[command(flatten)]
    pub sender: SenderArgs,
    /// The platform of a new conversation (none for the CLI). A session keeps the origin it
    /// was created with, so this cannot be given with `--session`.
    #[arg(long, conflicts_with = "session")]
    pub platform: Option<String>,
    /// The scope of a new conversation, `group:ID`, `private:ID` or `channel:ID` (not with
    /// `--session`).
    #[arg(long, conflicts_with = "session")]
    pub scope: Option<String>,
    /// The user's message of this turn (relative dates are read from it).
    #[arg(long, default_value = "")]
    pub message: String,
    /// Continue this session (its origin and agent) instead of starting one.
    #[arg(long)]
    pub session: Option<String>,
    /// The agent profile of a new session (its meta-tools come from the config file's
    /// `runtime.agents`).
    #[arg(long, default_value = "chat")]
    pub agent: String,
    /// Without a terminal, send questions to the console's approval queue and wait up to this
    /// many seconds for an operator to answer them with `quiver approvals`.
    #[arg(long, value_name = "SECONDS", conflicts_with = "yes")]
    pub console: Option<u64>,
    /// Answer consent and ordinary approvals with yes. Never a dangerous or `human` tool's
    /// approval: those always need a person at the terminal.
    #[arg(long)]
    pub yes: bool,
    /// Accepted for scripts: the output (the session id and the outcome) is JSON either way.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub state: StateArgs,
}

/// `quiver session ...`.
#[derive(Debug, clap::Subcommand)]
pub enum SessionCommand {
    /// List sessions.
    List {
        /// Ended sessions too.
        #[arg(long)]
        all: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        state: StateArgs,
    },
    /// Show one session: its state, loaded tools, opened packages, skills and consents.
    Show {
        /// The session id.
        id: String,
        /// Accepted for scripts: the output is JSON either way.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        state: StateArgs,
    },
    /// End a session (its active skills end).
    End {
        /// The session id.
        id: String,
        /// Print `{"session", "ended"}` as JSON on stdout.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        state: StateArgs,
    },
}

/// Arguments of `quiver audit`.
#[derive(Debug, clap::Args)]
pub struct AuditArgs {
    /// Only this session.
    #[arg(long)]
    pub session: Option<String>,
    /// At most this many records (newest first).
    #[arg(long, default_value_t = 50)]
    pub limit: usize,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub state: StateArgs,
}

/// Who sends: `--as` and `--platform-role`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SenderArgs {
    /// Who sends, `USER:ROLE` (role `master`, `trusted` or `user`), optionally followed by
    /// the roles the user holds on the conversation's platform, `USER:ROLE:owner,admin`;
    /// default the local owner.
    #[arg(long = "as", value_name = "USER:ROLE[:PLATFORM_ROLES]")]
    pub as_user: Option<String>,
    /// A role the sender holds on the conversation's platform (`admin`, `owner`), read by
    /// `platform(adapter,perm)`; `PLATFORM:ROLE` names the platform, which must be
    /// `--platform`'s (repeatable).
    #[arg(long = "platform-role", value_name = "[PLATFORM:]ROLE")]
    pub platform_roles: Vec<String>,
}

impl SenderArgs {
    /// The sender on a conversation on `platform`.
    pub(crate) fn principal(&self, platform: Option<&str>) -> miette::Result<Principal> {
        principal(self.as_user.as_deref(), &self.platform_roles, platform)
    }
}

/// The sender of `--as SPEC` with `--platform-role`s, on a conversation on `platform`.
pub(crate) fn principal(
    spec: Option<&str>,
    platform_roles: &[String],
    platform: Option<&str>,
) -> miette::Result<Principal> {
    let mut principal = match spec {
        None => Principal::user("local", Role::Master),
        Some(spec) => {
            let mut parts = spec.splitn(3, ':');
            let user = parts.next().unwrap_or_default();
            if user.is_empty() {
                return Err(miette::miette!("`--as` is `USER:ROLE`; the user is empty"));
            }
            let role = parts.next().unwrap_or("user");
            let role = Role::parse(role).ok_or_else(|| {
                miette::miette!("unknown role `{role}`; use master, trusted or user")
            })?;
            let mut principal = Principal::user(user, role);
            if let Some(roles) = parts.next() {
                principal.platform_roles = roles
                    .split(',')
                    .map(str::trim)
                    .filter(|r| !r.is_empty())
                    .map(str::to_owned)
                    .collect();
            }
            principal
        }
    };
    for given in platform_roles {
        let role = match given.split_once(':') {
            None => given.as_str(),
            Some((named, role)) => {
                if platform != Some(named) {
                    return Err(miette::miette!(
                        help = "platform roles are held on the conversation's platform: pass `--platform {named}`",
                        "`--platform-role {given}` names the platform `{named}`, but the conversation is on {}",
                        platform.map_or("no platform".to_owned(), |p| format!("`{p}`"))
                    ));
                }
                role
            }
        };
        if role.is_empty() {
            return Err(miette::miette!("`--platform-role {given}` names no role"));
        }
        if !principal.platform_roles.iter().any(|r| r == role) {
            principal.platform_roles.push(role.to_owned());
        }
    }
    if !principal.platform_roles.is_empty() && platform.is_none() {
        return Err(miette::miette!(
            help = "pass `--platform NAME`",
            "platform roles need the conversation's platform"
        ));
    }
    Ok(principal)
}

pub(crate) fn origin(platform: Option<&str>, scope: Option<&str>) -> miette::Result<Origin> {
    let scope = match scope {
        None => None,
        Some(text) => {
            let (kind, id) = text.split_once(':').ok_or_else(|| {
                miette::miette!("`--scope` is `group:ID`, `private:ID` or `channel:ID`")
            })?;
            let kind = match kind {
                "group" => ScopeKind::Group,
                "private" => ScopeKind::Private,
                "channel" => ScopeKind::Channel,
                other => return Err(miette::miette!("unknown scope kind `{other}`")),
            };
            Some(ConversationScope {
                kind,
                id: id.to_owned(),
            })
        }
    };
    Ok(Origin {
        platform: platform.map(str::to_owned),
        scope,
        channel: None,
    })
}

/// Runs `quiver call`: exit 0 when the call ran, 1 otherwise.
pub fn call(roots: &RootArgs, args: CallArgs) -> miette::Result<ExitCode> {
    let arguments: Value = serde_json::from_str(&args.args).map_err(|e| {
        miette::miette!(
            help = "pass a JSON object, such as '{{\"city\": \"北京\"}}'",
            "`--args` is not JSON: {e}"
        )
    })?;
    let config = crate::roots::config()?;
    let state = args.state.state_with(&config)?;
    let sender = args.sender.principal(args.platform.as_deref())?;
    let interactive = std::io::stdin().is_terminal();
    let person = TerminalApprover::new(
        std::io::BufReader::new(std::io::stdin()),
        std::io::stderr(),
        interactive,
        args.yes,
    );
    let console = args
        .console
        .map(|seconds| state.console_approver(std::time::Duration::from_secs(seconds)));
    // Without a terminal, a console queue answers instead of a person who cannot.
    let person = (interactive || console.is_none()).then(|| Arc::new(person) as Arc<dyn Approver>);
    // `tool_search` searches as `quiver search` does, without its notes.
    let search = quiver_host::SearchModels::load(config.search);
    let loading = crate::progress::Progress::loading();
    let host = Host::open(
        config,
        HostOptions {
            roots: roots.roots.clone(),
            state,
            search: Some(search),
            approvers: ApproverSet {
                person,
                console,
                reviewer: None,
            },
            launcher: crate::roots::launcher()?,
            reload: false,
        },
    )
    .map_err(crate::roots::fail)?;
    drop(loading);
    crate::roots::notices(host.notices());
    // A workflow's `agent` steps and exposed agents run on the configured models, as in
    // `quiver run` and `quiver serve`.
    if let Err(e) = host.run_agents_with_configured_models() {
        tracing::warn!("agents cannot run: {e}");
    }
    let runtime = host.runtime();
    // The runtime resolves wire and qualified names alike, and answers an unknown one by the
    // name as given, so the answer never tells whether the tool exists.
    let wire = args.tool.clone();
    let session = match &args.session {
        Some(id) => id.clone(),
        None => runtime
            .create_session(&SessionRequest {
                origin: origin(args.platform.as_deref(), args.scope.as_deref())?,
                agent: args.agent.clone(),
                principal: sender.clone(),
                profile: Profile::Interactive,
            })
            .map_err(|e| miette::miette!("{e}"))?,
    };
    let mut turn = runtime
        .begin_turn(&session, sender, &args.message)
        .map_err(|e| miette::miette!("{e}"))?;
    let outcome = turn
        .call(&wire, arguments)
        .map_err(|e| miette::miette!("{e}"))?;
    crate::out(
        &serde_json::to_string_pretty(&json!({"session": session, "outcome": outcome}))
            .unwrap_or_default(),
    );
    Ok(if outcome.status == CallStatus::Ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Runs `quiver session ...`.
pub fn session(command: SessionCommand) -> miette::Result<ExitCode> {
    match command {
        SessionCommand::List { all, json, state } => {
            let admin = state.admin()?;
            let filter = SessionFilter {
                status: if all {
                    SessionStatus::Any
                } else {
                    SessionStatus::Active
                },
                agent: None,
                limit: None,
            };
            let sessions = admin
                .sessions(&filter)
                .map_err(|e| miette::miette!("{e}"))?;
            if json {
                crate::out(&serde_json::to_string_pretty(&sessions).unwrap_or_default());
            } else {
                let lines: Vec<String> = sessions
                    .iter()
                    .map(|s| {
                        format!(
                            "{}  {}  {}  {}",
                            crate::shown(&s.id),
                            crate::shown(&s.agent),
                            if s.is_active() { "active" } else { "ended" },
                            crate::shown_json(&s.origin)
                        )
                    })
                    .collect();
                crate::out(&lines.join("\n"));
            }
            Ok(ExitCode::SUCCESS)
        }
        SessionCommand::Show { id, state, .. } => {
            let admin = state.admin()?;
            let Some(view) = admin.session(&id).map_err(|e| miette::miette!("{e}"))? else {
                crate::err(&format!("error: no session `{}`", crate::shown(&id)));
                return Ok(ExitCode::FAILURE);
            };
            crate::out(&serde_json::to_string_pretty(&view).unwrap_or_default());
            Ok(ExitCode::SUCCESS)
        }
        SessionCommand::End { id, json, state } => {
            let ended = state
                .admin()?
                .end_session(&id, &super::operator::operator_name())
                .map_err(|e| miette::miette!("{e}"))?;
            if json {
                crate::out(&json!({"session": id, "ended": ended}).to_string());
            }
            crate::err(if ended {
                "ended"
            } else {
                "no such active session"
            });
            Ok(if ended {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
    }
}

/// Runs `quiver audit`.
pub fn audit(args: AuditArgs) -> miette::Result<ExitCode> {
    let admin = args.state.admin()?;
    let query = AuditQuery {
        session: args.session,
        limit: Some(args.limit),
        ..AuditQuery::default()
    };
    let records = admin.audit(&query).map_err(|e| miette::miette!("{e}"))?;
    if args.json {
        crate::out(&serde_json::to_string_pretty(&records).unwrap_or_default());
    } else {
        let lines: Vec<String> = records
            .iter()
            .map(|r| {
                let e = &r.entry;
                let last = e
                    .decisions
                    .last()
                    .map(|d| format!("{}: {} ({})", d.step, d.decision, d.reason))
                    .unwrap_or_default();
                let what = match (&e.tool, &e.skill) {
                    (Some(name), _) | (None, Some(name)) => name.as_str(),
                    (None, None) => e.kind.as_str(),
                };
                format!(
                    "{:>5}  {}  {}  {}  {}  {}",
                    r.id,
                    crate::shown(&e.session),
                    crate::shown(what),
                    crate::shown(e.status.as_str()),
                    e.duration_ms,
                    crate::shown(&last)
                )
            })
            .collect();
        crate::out(&lines.join("\n"));
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--as`, `--platform-role`s, `--platform`, and the sender wanted (user, role, platform
    /// roles) or a part of the error.
    type Case<'a> = (
        Option<&'a str>,
        Vec<String>,
        Option<&'a str>,
        Result<(&'a str, Role, Vec<&'a str>), &'a str>,
    );

    #[test]
    fn senders_with_platform_roles() {
        let roles = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let cases: [Case<'_>; 8] = [
            (None, vec![], None, Ok(("local", Role::Master, vec![]))),
            (
                Some("alice"),
                vec![],
                None,
                Ok(("alice", Role::User, vec![])),
            ),
            (
                Some("alice:trusted"),
                vec![],
                None,
                Ok(("alice", Role::Trusted, vec![])),
            ),
            (
                Some("alice:user:owner"),
                vec![],
                Some("qq"),
                Ok(("alice", Role::User, vec!["owner"])),
            ),
            (
                Some("alice:user"),
                roles(&["qq:admin", "owner"]),
                Some("qq"),
                Ok(("alice", Role::User, vec!["admin", "owner"])),
            ),
            (
                Some("alice:user"),
                roles(&["qq:admin"]),
                Some("discord"),
                Err("names the platform `qq`"),
            ),
            (
                Some("alice:user:owner"),
                vec![],
                None,
                Err("need the conversation's platform"),
            ),
            (Some("alice:boss"), vec![], None, Err("unknown role `boss`")),
        ];
        for (spec, platform_roles, platform, want) in cases {
            let got = principal(spec, &platform_roles, platform);
            match (got, want) {
                (Ok(p), Ok((user, role, roles))) => {
                    assert_eq!(p.user_id.as_deref(), Some(user), "{spec:?}");
                    assert_eq!(p.role, Some(role), "{spec:?}");
                    assert_eq!(p.platform_roles, roles, "{spec:?}");
                }
                (Err(e), Err(want)) => assert!(e.to_string().contains(want), "{spec:?}: {e}"),
                (got, want) => panic!("{spec:?}: got {got:?}, want {want:?}"),
            }
        }
    }
}
