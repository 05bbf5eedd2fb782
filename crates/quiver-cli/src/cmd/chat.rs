//! `quiver chat` (a terminal chat, or one turn with `-m`): the agent loop of `quiver-agent`
//! over the runtime. `quiver eval` (in `eval.rs`) shares its [`ModelArgs`].

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use quiver_agent::agents::{self, Providers};
use quiver_agent::session::{CallRecord, SystemPrompt, ToolScope};
use quiver_agent::skill_command::{self, SkillCommandError, SkillStart};
use quiver_agent::{AgentConfig, ChatSession, Observer, Quiet, SubAgents, TurnReport};
use quiver_host::{Host, HostOptions};
use quiver_runtime::approver::{
    Answer, Approver, CARD_CHOICES, Card, TerminalApprover, answer_from, card_text,
};
use quiver_runtime::{ApproverSet, CallStatus, Profile, Runtime, SessionRequest};
use serde_json::{Value, json};

use super::runtime::{StateArgs, origin};
use crate::roots::RootArgs;

/// Which model answers.
#[derive(Debug, Clone, clap::Args)]
pub struct ModelArgs {
    /// The agent configuration file (default: `$QUIVER_AGENT_CONFIG`, else
    /// `~/.config/quiver/agent.yaml`).
    #[arg(long = "agent-config", value_name = "PATH")]
    pub agent_config: Option<PathBuf>,
    /// The provider, by its name in the configuration.
    #[arg(long)]
    pub provider: Option<String>,
    /// The model, instead of the provider's own.
    #[arg(long)]
    pub model: Option<String>,
}

impl ModelArgs {
    /// The providers of the agent configuration, with `--provider` and `--model` applied.
    pub(crate) fn providers(&self) -> miette::Result<Arc<Providers>> {
        let mut config = AgentConfig::load(self.agent_config.as_deref()).map_err(|e| {
            miette::miette!(help = "see docs/agent.md for the configuration", "{e}")
        })?;
        if let Some(p) = &self.provider {
            config.default = Some(p.clone());
        }
        if let Some(m) = &self.model {
            let name = config
                .default_provider()
                .map_err(|e| miette::miette!("{e}"))?
                .to_owned();
            if let Some(p) = config.providers.get_mut(&name) {
                p.model.clone_from(m);
            }
        }
        config
            .default_provider()
            .map_err(|e| miette::miette!(help = "see docs/agent.md for examples", "{e}"))?;
        Ok(Arc::new(Providers::new(config)))
    }
}

/// Arguments of `quiver chat`.
#[derive(Debug, clap::Args)]
pub struct ChatArgs {
    /// Run one turn with this message, print the reply and exit (no terminal needed).
    #[arg(short = 'm', long = "message")]
    pub message: Option<String>,
    /// With `-m`: print the reply, each tool call with its decisions and result, and the token
    /// counts as JSON.
    #[arg(long, requires = "message")]
    pub json: bool,
    /// Talk to this package agent (`<package>.<agent>`) instead of the default chat agent.
    #[arg(long)]
    pub agent: Option<String>,
    #[command(flatten)]
    pub sender: super::runtime::SenderArgs,
    /// The platform the conversation is on; an agent declaring it is chosen automatically.
    #[arg(long)]
    pub platform: Option<String>,
    /// The conversation scope, `group:ID`, `private:ID` or `channel:ID`.
    #[arg(long)]
    pub scope: Option<String>,
    /// Continue this runtime session (its consents, loaded tools and skills; not its messages).
    #[arg(long)]
    pub session: Option<String>,
    /// Answer consent and ordinary approvals with yes; never a dangerous or `human` tool's.
    #[arg(long)]
    pub yes: bool,
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub state: StateArgs,
}

pub(crate) fn fail(e: impl std::fmt::Display) -> miette::Report {
    miette::miette!("{e}")
}

/// A person at this terminal: cards and questions on stderr, answers from stdin (shared with
/// the chat's own prompt, so both read the same lines).
struct Person {
    assume_yes: bool,
}

fn read_line() -> Option<String> {
    let mut line = String::new();
    match std::io::stdin().read_line(&mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(line.trim().to_owned()),
    }
}

impl Approver for Person {
    fn decide(&self, card: &Card) -> Answer {
        if self.assume_yes && !card.needs_person {
            return Answer::AllowForSession;
        }
        crate::err(&card_text(card));
        let _ = write!(std::io::stderr(), "{}", CARD_CHOICES.trim_start());
        let _ = std::io::stderr().flush();
        answer_from(read_line().as_deref(), card)
    }

    fn answer_question(&self, question: &str) -> Option<String> {
        crate::err(&format!("\nThe assistant asks: {question}"));
        let _ = write!(std::io::stderr(), "> ");
        let _ = std::io::stderr().flush();
        read_line()
    }
}

/// Streams the reply to stdout and shows each tool call on stderr.
struct Show {
    stream: bool,
    mid_line: bool,
}

impl Show {
    fn end_line(&mut self) {
        if self.mid_line {
            let _ = writeln!(std::io::stdout());
            self.mid_line = false;
        }
    }
}

/// A call's arguments or result, at most 160 characters, safe to print (see [`crate::shown`]).
fn short(value: &Value) -> String {
    let text = crate::shown_json(value);
    if text.chars().count() > 160 {
        format!("{}…", text.chars().take(160).collect::<String>())
    } else {
        text
    }
}

fn status_word(status: CallStatus) -> &'static str {
    match status {
        CallStatus::Ok => "ok",
        CallStatus::Error => "error",
        CallStatus::Refused => "refused",
        CallStatus::Invalid => "invalid",
        CallStatus::Unknown => "unknown",
        CallStatus::TimedOut => "timed out",
        CallStatus::Pending => "waiting for an answer",
    }
}

impl Observer for Show {
    fn text(&mut self, delta: &str) {
        if self.stream && !delta.is_empty() {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(delta.as_bytes());
            let _ = out.flush();
            self.mid_line = true;
        }
    }

    fn call_started(&mut self, name: &str, arguments: &Value) {
        self.end_line();
        crate::err(&format!("→ {} {}", crate::shown(name), short(arguments)));
    }

    fn call_finished(&mut self, record: &CallRecord) {
        crate::err(&format!(
            "  ← {}: {}",
            status_word(record.status),
            short(&record.result)
        ));
    }

    fn step_finished(&mut self) {
        self.end_line();
    }
}

fn progress_line(depth: usize, agent: &str, record: &CallRecord) {
    crate::err(&format!(
        "{}↳ {}: {} {} ← {}",
        "  ".repeat(depth),
        crate::shown(agent),
        crate::shown(&record.name),
        short(&record.arguments),
        status_word(record.status)
    ));
}

/// The chat's agent: `--agent`, else the one agent declaring `--platform`, else `chat`.
fn choose_agent(runtime: &Runtime, args: &ChatArgs) -> miette::Result<Option<String>> {
    let catalog = runtime.catalog();
    if let Some(agent) = &args.agent {
        agents::profile(&catalog, agent).map_err(fail)?;
        return Ok(Some(agent.clone()));
    }
    match &args.platform {
        Some(platform) => agents::agent_for_platform(&catalog, platform).map_err(fail),
        None => Ok(None),
    }
}

fn report_json(session: &str, agent: &str, report: &TurnReport) -> Value {
    let calls: Vec<Value> = report
        .calls
        .iter()
        .map(|c| {
            json!({
                "call_id": c.call_id,
                "name": c.name,
                "arguments": c.arguments,
                "status": c.status,
                "decisions": c.decisions,
                "result": c.result,
            })
        })
        .collect();
    json!({
        "session": session,
        "agent": agent,
        "reply": report.reply,
        "calls": calls,
        "usage": {"input_tokens": report.usage.input_tokens, "output_tokens": report.usage.output_tokens, "total_tokens": report.usage.total()},
        "prompt_tokens": report.prompt_tokens,
        "steps": report.steps,
        "stopped": report.stopped,
    })
}

/// Runs `quiver chat`.
pub fn chat(roots: &RootArgs, args: ChatArgs) -> miette::Result<ExitCode> {
    let providers = args.model.providers()?;
    let sender = args.sender.principal(args.platform.as_deref())?;
    let interactive = args.message.is_none();
    if interactive && !std::io::stdin().is_terminal() {
        return Err(miette::miette!(
            help = "run one turn with `quiver chat -m MESSAGE`",
            "`quiver chat` needs a terminal"
        ));
    }
    let person: Arc<dyn Approver> = if interactive {
        Arc::new(Person {
            assume_yes: args.yes,
        })
    } else {
        Arc::new(TerminalApprover::new(
            std::io::BufReader::new(std::io::stdin()),
            std::io::stderr(),
            std::io::stdin().is_terminal(),
            args.yes,
        ))
    };
    let config = crate::roots::config()?;
    let search = quiver_host::SearchModels::load(config.search);
    let state = args.state.state_with(&config)?;
    let loading = crate::progress::Progress::loading();
    let host = Host::open(
        config,
        HostOptions {
            roots: roots.roots.clone(),
            state,
            search: Some(search),
            approvers: ApproverSet {
                person: Some(person.clone()),
                console: None,
                reviewer: None,
            },
            launcher: crate::roots::launcher()?,
            reload: true,
        },
    )
    .map_err(crate::roots::fail)?;
    drop(loading);
    crate::roots::notices(host.notices());
    let runtime = host.runtime();
    let mut runner = SubAgents::new(providers.clone());
    if !args.json {
        runner = runner.with_progress(Arc::new(progress_line));
    }
    runtime.set_agent_runner(Arc::new(runner));
    let agent = choose_agent(runtime, &args)?;
    let profile = match &agent {
        Some(a) => Some(host.agent_profile(a).map_err(fail)?),
        None => None,
    };
    let session = match &args.session {
        Some(id) => id.clone(),
        None => {
            let id = runtime
                .create_session(&SessionRequest {
                    origin: origin(args.platform.as_deref(), args.scope.as_deref())?,
                    agent: agent.clone().unwrap_or_else(|| "chat".into()),
                    principal: sender.clone(),
                    profile: Profile::Interactive,
                })
                .map_err(fail)?;
            if let Some(p) = &profile {
                agents::load_declared(runtime, &id, &p.loads).map_err(fail)?;
            }
            id
        }
    };
    let (provider, mut options) = providers
        .for_agent(
            agent.as_deref(),
            profile.as_ref().and_then(|p| p.model.as_deref()),
        )
        .map_err(fail)?;
    if let Some(steps) = profile.as_ref().and_then(|p| p.max_steps) {
        options.max_steps = steps.max(1);
    }
    options.count_tokens = args.json;
    let mut chat = ChatSession::new(runtime, provider, options, &session, sender.clone())
        .with_person(person.clone());
    if let Some(p) = &profile {
        chat = chat
            .with_scope(ToolScope::Only(p.tools.clone()))
            .with_system(SystemPrompt::Fixed(p.system.clone()));
    }
    let agent_name = agent.clone().unwrap_or_else(|| "chat".into());
    if let Some(message) = &args.message {
        let report = if args.json {
            chat.send(message, &mut Quiet)
        } else {
            chat.send(
                message,
                &mut Show {
                    stream: false,
                    mid_line: false,
                },
            )
        }
        .map_err(fail)?;
        if args.json {
            let value = report_json(&session, &agent_name, &report);
            crate::out(&serde_json::to_string_pretty(&value).unwrap_or_default());
        } else {
            crate::out(&report.reply);
        }
        return Ok(ExitCode::SUCCESS);
    }
    crate::err(&format!(
        "quiver chat · agent `{agent_name}` · session {session}\n/skills /tools /audit /reset /<skill> [text] /quit"
    ));
    let mut show = Show {
        stream: true,
        mid_line: false,
    };
    loop {
        let _ = write!(std::io::stderr(), "\n> ");
        let _ = std::io::stderr().flush();
        let Some(line) = read_line() else { break };
        if line.is_empty() {
            continue;
        }
        let result = match line.as_str() {
            "/quit" | "/exit" => break,
            "/skills" => list_skills(&chat),
            "/tools" => list_tools(&chat),
            "/audit" => {
                show_audit(runtime, &session);
                Ok(())
            }
            "/reset" => chat
                .reset()
                .map(|ended| {
                    crate::err(&format!(
                        "conversation cleared{}",
                        if ended.is_empty() {
                            String::new()
                        } else {
                            format!("; skills ended: {}", ended.join(", "))
                        }
                    ));
                })
                .map_err(fail),
            command if command.starts_with('/') => start_skill(&mut chat, command, &mut show),
            message => chat
                .send(message, &mut show)
                .map(|report| {
                    show.end_line();
                    if !show.stream || report.steps == 0 {
                        crate::out(&report.reply);
                    }
                    if report.compacted {
                        crate::err("(older messages were compacted; active skills ended)");
                    }
                })
                .map_err(fail),
        };
        if let Err(e) = result {
            show.end_line();
            crate::err(&format!("error: {e}"));
        }
    }
    runtime.end_session(&session).map_err(fail)?;
    Ok(ExitCode::SUCCESS)
}

fn list_skills(chat: &ChatSession<'_>) -> miette::Result<()> {
    let turn = chat.begin_turn("").map_err(fail)?;
    let lines: Vec<String> = turn
        .skills_for_user()
        .into_iter()
        .map(|skill| {
            let mut line = format!(
                "/{}  {}",
                crate::shown(&skill.id),
                crate::shown(&skill.description)
            );
            if skill.meta.disable_model_invocation {
                line.push_str("  (only by hand)");
            }
            if skill.meta.fork {
                line.push_str("  (runs in a sub-agent)");
            }
            line
        })
        .collect();
    crate::out(&lines.join("\n"));
    Ok(())
}

fn list_tools(chat: &ChatSession<'_>) -> miette::Result<()> {
    let turn = chat.begin_turn("").map_err(fail)?;
    let (_, tools) = chat.prepare(&turn).map_err(fail)?;
    let lines: Vec<String> = tools
        .iter()
        .map(|t| {
            format!(
                "{}  {}",
                crate::shown(&t.name),
                crate::shown(t.description.lines().next().unwrap_or_default())
            )
        })
        .collect();
    crate::out(&lines.join("\n"));
    Ok(())
}

fn show_audit(runtime: &Runtime, session: &str) {
    let lines: Vec<String> = runtime
        .session_audit(session, 30)
        .unwrap_or_default()
        .iter()
        .rev()
        .map(|r| {
            let e = &r.entry;
            let last = e
                .decisions
                .iter()
                .map(|d| format!("{}: {}", d.step, d.decision))
                .collect::<Vec<_>>()
                .join(", ");
            format!(
                "{:?}  {}  {}  {}",
                e.kind,
                crate::shown(e.tool.as_deref().or(e.skill.as_deref()).unwrap_or("-")),
                e.status,
                crate::shown(&last)
            )
        })
        .collect();
    crate::out(&lines.join("\n"));
}

/// `/<skill> [text]`: a person starts a skill (`quiver_agent::skill_command`); the reply or
/// the forked skill's result is shown.
fn start_skill(chat: &mut ChatSession<'_>, command: &str, show: &mut Show) -> miette::Result<()> {
    match skill_command::start(chat, command.trim_start_matches('/'), show) {
        Ok(SkillStart::Forked(result)) => crate::out(&result),
        Ok(SkillStart::Replied(report)) => {
            show.end_line();
            if report.steps == 0 {
                crate::out(&report.reply);
            }
        }
        Err(e @ SkillCommandError::NoSuchSkill { .. }) => {
            return Err(miette::miette!(help = "`/skills` lists them", "{e}"));
        }
        Err(e) => return Err(fail(e)),
    }
    Ok(())
}
