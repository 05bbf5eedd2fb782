//! Quiver's agent loop: a model converses over the runtime, calling its tools.
//!
//! The main types are [`ChatSession`] (one conversation: [`ChatSession::send`] runs a turn
//! with native tool calls or the JSON action format), the [`Provider`]s that speak
//! OpenAI-compatible chat completions and Anthropic messages, [`AgentConfig`] (providers by
//! file and environment), [`SubAgents`] (the runtime's runner for exposed agents and forked
//! skills) and [`eval`] (how well a model picks tools, against the eager baseline).
//!
//! ```no_run
//! # fn demo(runtime: &quiver_runtime::Runtime, session: &str) -> Result<(), quiver_agent::AgentError> {
//! use std::sync::Arc;
//! use quiver_agent::{AgentConfig, ChatSession, Providers, Quiet};
//! let providers = Providers::new(AgentConfig::load(None)?);
//! let (provider, options) = providers.for_agent(None, None)?;
//! let owner = quiver_policy::Principal::user("me", quiver_package::rules::Role::Master);
//! let mut chat = ChatSession::new(runtime, provider, options, session, owner);
//! let report = chat.send("北京明天多少度", &mut Quiet)?;
//! println!("{}", report.reply);
//! # Ok(()) }
//! ```

pub mod action;
pub mod agents;
pub mod config;
pub mod cost;
mod error;
pub mod eval;
#[cfg(feature = "fake-server")]
pub mod fake;
pub mod prompt;
pub mod provider;
pub mod session;
pub mod skill_command;
pub mod tokens;

pub use agents::{Providers, SubAgents};
pub use config::{AgentConfig, ProviderConfig, ProviderKind, ToolMode};
pub use error::AgentError;
pub use provider::{Provider, ProviderError};
pub use session::{CallRecord, ChatSession, LoopOptions, Observer, Quiet, TurnReport};
