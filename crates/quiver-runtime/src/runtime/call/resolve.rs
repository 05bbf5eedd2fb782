//! Step 1: resolve the name. A wire name (`weather__forecast`) or a qualified one
//! (`weather.forecast`) names an item; what the caller may not reach now (another package's
//! private item, a tool no active skill unlocks, a package switched off, an item whose
//! restrictions the caller does not meet) is answered exactly as a name that does not exist,
//! so a call never reveals that something exists.

use quiver_catalog::{Catalog, ItemKind};
use quiver_package::tool::{Approval, Category, Run, ToolScope};
use quiver_policy::{ToolFacts, Visibility};
use serde_json::{Value, json};

use super::{CallKind, Runs, Target};
use crate::presence::{is_offered, reach};
use crate::runtime::{CallOutcome, CallStatus, RuntimeError, Turn};

/// The input an agent takes: what it should do.
pub(in crate::runtime) fn agent_input() -> Value {
    json!({"type": "object", "properties": {"task": {"type": "string", "minLength": 1,
        "description": "what the agent should do"}}, "required": ["task"]})
}

impl Turn<'_> {
    /// The item `name` names in `catalog`, as a [`Target`], if this caller may reach it now.
    pub(in crate::runtime) fn resolve<'c>(
        &self,
        catalog: &'c Catalog,
        name: &str,
        arguments: &Value,
        agent_input: &'c Value,
    ) -> Result<Option<Target<'c>>, RuntimeError> {
        let view = self.view()?;
        let resolved = catalog.item_by_wire(name).or_else(|| catalog.item(name));
        let Some(index) = resolved.and_then(|item| {
            reach(catalog, &view, item.wire.as_deref()?, &|i| {
                self.admitted_unconfigured(i)
            })
        }) else {
            return Ok(None);
        };
        let item = &catalog.items()[index];
        let package = &catalog.packages()[item.package].package;
        let always = self.runtime.always_loaded(catalog);
        let offered = is_offered(catalog, &view, &always.resident, index, &|i| {
            self.admitted_unconfigured(i)
        });
        let slot = crate::presence::slot(catalog, item);
        let touch = offered
            && view.loaded.first().map(String::as_str) != Some(slot)
            && view.loaded.iter().any(|l| l == slot);
        let target = match item.kind {
            ItemKind::Tool => {
                let Some(tool) = catalog.tool(item) else {
                    return Ok(None);
                };
                let mut facts = ToolFacts::of_tool(package.id.as_str(), tool);
                facts.package_permission = Some(&package.manifest.permissions);
                if tool.scope != ToolScope::Package {
                    // A skill unlocks its tools for the model; an agent's tools are its own.
                    facts.visibility = Visibility::Exposed;
                }
                Target {
                    kind: match tool.run {
                        Run::Mcp { .. } => CallKind::McpTool,
                        _ => CallKind::PackageTool,
                    },
                    asked_as: name.to_owned(),
                    qualified: item.qualified.clone(),
                    package,
                    facts,
                    item: Some(index),
                    offered,
                    touch,
                    input: Some(&tool.input),
                    first_string: first_string_argument(&tool.input, arguments),
                    runs: Runs::Tool(tool),
                }
            }
            ItemKind::Agent | ItemKind::Workflow => {
                let (kind, local, exposed, runs) = match item.kind {
                    ItemKind::Agent => {
                        let Some(agent) = package.agents.get(item.index) else {
                            return Ok(None);
                        };
                        (
                            CallKind::Agent,
                            agent.name.as_str(),
                            agent.expose,
                            Runs::Agent,
                        )
                    }
                    _ => {
                        let Some(workflow) = package.workflows.get(item.index) else {
                            return Ok(None);
                        };
                        let name = workflow.name.as_str();
                        (CallKind::Workflow, name, workflow.expose, Runs::Workflow)
                    }
                };
                // An agent only reasons; each tool it calls is governed on its own.
                let mut facts = ToolFacts::new(package.id.as_str(), local);
                facts.package_permission = Some(&package.manifest.permissions);
                facts.category = Category::Decision;
                facts.approval = Approval::Never;
                facts.visibility = if exposed {
                    Visibility::Exposed
                } else {
                    Visibility::Private
                };
                Target {
                    kind,
                    asked_as: name.to_owned(),
                    qualified: item.qualified.clone(),
                    package,
                    facts,
                    item: Some(index),
                    offered,
                    touch,
                    input: (kind == CallKind::Agent).then_some(agent_input),
                    first_string: None,
                    runs,
                }
            }
        };
        Ok(Some(target))
    }

    /// What the caller reads for a name it cannot reach: the name as given, nothing more.
    pub(in crate::runtime) fn unknown(&self, call_id: &str, name: &str) -> CallOutcome {
        CallOutcome::new(
            call_id,
            CallStatus::Unknown,
            json!({"error": format!("unknown tool: {name}")}),
        )
    }
}

/// The first property of the schema, in declaration order, whose value is a string.
pub(in crate::runtime) fn first_string_argument(
    schema: &Value,
    arguments: &Value,
) -> Option<String> {
    let props = schema.get("properties")?.as_object()?;
    props
        .keys()
        .find_map(|k| arguments.get(k).and_then(Value::as_str).map(str::to_owned))
}
