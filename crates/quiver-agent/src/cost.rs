//! Token accounting: what the system prompt and tool definitions of a turn cost, with
//! progressive disclosure (the catalog and the meta-tools) and with the eager baseline (every
//! exposed tool's schema, no meta-tools), and each package's share of both.

use quiver_catalog::render::package_list;
use quiver_policy::{Origin, Principal};
use quiver_runtime::{Profile, Runtime, SessionRequest, presence};
use serde::Serialize;

use crate::config::ToolMode;
use crate::error::AgentError;
use crate::eval::{EAGER_AGENT, load_every_tool};
use crate::session::{SystemPrompt, ToolScope, request_parts};
use crate::tokens;

/// What one request carries before the conversation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TurnCost {
    /// Tools offered.
    pub tools: usize,
    /// Tokens of the system prompt.
    pub system_tokens: usize,
    /// Tokens of the tool definitions.
    pub tool_tokens: usize,
}

impl TurnCost {
    /// System prompt and tools together.
    pub fn total(&self) -> usize {
        self.system_tokens + self.tool_tokens
    }
}

/// One package's share.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PackageCost {
    /// Its id.
    pub package: String,
    /// Tokens of its lines in the catalog (progressive).
    pub catalog_tokens: usize,
    /// Tokens of its tool definitions (eager).
    pub eager_tokens: usize,
    /// Tokens a request grows by once `tool_search` or `load_tool` hits one of its exposed
    /// items: the hit brings all of them (seed 000's whole-package rule) into one loaded slot.
    /// 0 for a package that exposes nothing callable.
    pub loaded_tokens: usize,
}

/// The cost of a catalog per turn.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CatalogCost {
    /// Packages, in catalog order.
    pub packages: Vec<PackageCost>,
    /// With progressive disclosure, before anything is searched or opened.
    pub progressive: TurnCost,
    /// With every tool schema in the prompt.
    pub eager: TurnCost,
    /// `1 - progressive / eager`.
    pub reduction: f64,
    /// Loaded slots per session (`max_loaded`), each holding one package.
    pub loaded_slots: usize,
    /// The most a progressive request reaches with every loaded slot held by the most
    /// expensive packages: [`CatalogCost::progressive`] plus their [`PackageCost::loaded_tokens`].
    pub all_slots_tokens: usize,
}

/// What a measured turn's session holds before the request is built.
#[derive(Clone, Copy)]
enum Before<'a> {
    /// Nothing: a fresh turn.
    Nothing,
    /// Every tool loaded (the eager baseline).
    EveryTool,
    /// One item loaded through `load_tool` (its whole package, for an exposed item).
    Load(&'a str),
}

/// Tokens of a fresh eager turn of `sender` from the CLI: the system prompt and every
/// exposed tool's definition (the baseline a counted turn is recorded against).
pub fn eager_tokens(runtime: &Runtime, sender: &Principal) -> Result<usize, AgentError> {
    let session = runtime.create_session(&SessionRequest {
        origin: Origin::default(),
        agent: EAGER_AGENT.to_owned(),
        principal: sender.clone(),
        profile: Profile::Interactive,
    })?;
    let measured = (|| {
        load_every_tool(runtime, &session)?;
        let turn = runtime.begin_turn(&session, sender.clone(), "")?;
        let (system, tools) = request_parts(
            &turn,
            &ToolScope::All,
            &SystemPrompt::Runtime,
            ToolMode::Native,
        )?;
        Ok::<usize, AgentError>(tokens::count(&system) + tokens::tools(&tools))
    })();
    runtime.end_session(&session)?;
    measured
}

/// Measures the catalog of `runtime` for a turn of `sender` from the CLI (no platform).
pub fn measure(runtime: &Runtime, sender: &Principal) -> Result<CatalogCost, AgentError> {
    let turn_cost =
        |agent: &str, before: Before<'_>| -> Result<(TurnCost, Vec<(String, usize)>), AgentError> {
            let session = runtime.create_session(&SessionRequest {
                origin: Origin::default(),
                agent: agent.to_owned(),
                principal: sender.clone(),
                profile: Profile::Interactive,
            })?;
            if let Before::EveryTool = before {
                load_every_tool(runtime, &session)?;
            }
            let mut turn = runtime.begin_turn(&session, sender.clone(), "")?;
            if let Before::Load(wire) = before {
                turn.call("load_tool", serde_json::json!({ "name": wire }))?;
            }
            let (system, tools) = request_parts(
                &turn,
                &ToolScope::All,
                &SystemPrompt::Runtime,
                ToolMode::Native,
            )?;
            let per_tool = tools
                .iter()
                .map(|t| (t.name.clone(), tokens::tools(std::slice::from_ref(t))))
                .collect();
            let cost = TurnCost {
                tools: tools.len(),
                system_tokens: tokens::count(&system),
                tool_tokens: tokens::tools(&tools),
            };
            drop(turn);
            runtime.end_session(&session)?;
            Ok((cost, per_tool))
        };
    let (progressive, _) = turn_cost("chat", Before::Nothing)?;
    let loaded_tokens = |index: usize| -> Result<usize, AgentError> {
        let catalog = runtime.catalog();
        let package = catalog.packages()[index].package.id.as_str();
        let exposed = catalog
            .items()
            .iter()
            .find(|i| {
                i.package == index && i.wire.is_some() && presence::slot(&catalog, i) == package
            })
            .and_then(|i| i.wire.as_deref());
        Ok(match exposed {
            Some(wire) => turn_cost("chat", Before::Load(wire))?
                .0
                .total()
                .saturating_sub(progressive.total()),
            None => 0,
        })
    };
    let (eager, per_tool) = turn_cost(EAGER_AGENT, Before::EveryTool)?;
    let catalog = runtime.catalog();
    let packages = catalog
        .packages()
        .iter()
        .enumerate()
        .filter(|(_, p)| !p.shadowed)
        .map(|(index, cp)| {
            let lines = package_list(&catalog, &|e| e.package == Some(index), usize::MAX);
            let eager_tokens = per_tool
                .iter()
                .filter(|(wire, _)| {
                    catalog
                        .item_by_wire(wire)
                        .is_some_and(|i| i.package == index)
                })
                .map(|(_, t)| t)
                .sum();
            Ok(PackageCost {
                package: cp.package.id.to_string(),
                catalog_tokens: tokens::count(&lines.text),
                eager_tokens,
                loaded_tokens: loaded_tokens(index)?,
            })
        })
        .collect::<Result<Vec<_>, AgentError>>()?;
    let loaded_slots = runtime.max_loaded();
    let mut by_cost: Vec<usize> = packages.iter().map(|p| p.loaded_tokens).collect();
    by_cost.sort_unstable_by(|a, b| b.cmp(a));
    let all_slots_tokens = progressive.total() + by_cost.iter().take(loaded_slots).sum::<usize>();
    let reduction = if eager.total() == 0 {
        0.0
    } else {
        1.0 - progressive.total() as f64 / eager.total() as f64
    };
    Ok(CatalogCost {
        packages,
        progressive,
        eager,
        reduction,
        loaded_slots,
        all_slots_tokens,
    })
}
