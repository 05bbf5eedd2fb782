//! A skill started by a person (`/<skill> [text]` in a chat), including
//! `disable-model-invocation` skills. The runtime admits it for this turn as `read_skill`
//! would (package on, platforms, scopes, permissions, model), activates it (or runs a
//! `context: fork` skill in a sub-agent with `text` as the request) and audits it; then the
//! model is told, in the person's name, that the skill was started and what it says.

use crate::error::AgentError;
use crate::session::{ChatSession, Observer, TurnReport};

/// What starting the skill did.
#[derive(Debug)]
pub enum SkillStart {
    /// A forked skill ran in a sub-agent; its last reply.
    Forked(String),
    /// The skill is active and the model answered the person's message about it.
    Replied(TurnReport),
}

/// Why the skill did not start.
#[derive(Debug, thiserror::Error)]
pub enum SkillCommandError {
    /// No skill of that id is admitted for this sender here.
    #[error("no skill command `/{id}`: {why}")]
    NoSuchSkill {
        /// The id asked for.
        id: String,
        /// The runtime's reason.
        why: String,
    },
    /// The turn failed.
    #[error(transparent)]
    Agent(#[from] AgentError),
}

/// Starts the skill of `command` (`<id> [text]`, without the slash) in `chat`.
pub fn start(
    chat: &mut ChatSession<'_>,
    command: &str,
    observer: &mut dyn Observer,
) -> Result<SkillStart, SkillCommandError> {
    let (id, text) = command
        .split_once(char::is_whitespace)
        .unwrap_or((command, ""));
    let text = text.trim();
    let mut turn = chat.begin_turn(text)?;
    let outcome = turn.start_skill_by_user(id).map_err(AgentError::from)?;
    chat.end_turn(&turn);
    drop(turn);
    if outcome.is_error() {
        return Err(SkillCommandError::NoSuchSkill {
            id: id.to_owned(),
            why: outcome.content["error"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        });
    }
    if let Some(result) = outcome.content["result"].as_str() {
        return Ok(SkillStart::Forked(result.to_owned()));
    }
    let instructions = match outcome.content["instructions"].as_str() {
        Some(body) => format!("Its instructions:]\n\n{}", body.trim()),
        None => "It was already active; its instructions are above.]".to_owned(),
    };
    let message = format!(
        "[I started the skill `{id}`. {instructions}\n\n{}",
        if text.is_empty() { "Go ahead." } else { text }
    );
    Ok(SkillStart::Replied(chat.send(&message, observer)?))
}
