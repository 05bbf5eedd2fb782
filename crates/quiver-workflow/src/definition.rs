//! The pinned definition a run executes: the parsed workflow plus what the engine must know of
//! each step's target, stored by the digest of its content. Reloads, upgrades and uninstalls
//! never change a running definition: a run names its digest.

use std::collections::{BTreeMap, BTreeSet};

use quiver_package::Package;
use quiver_package::tool::Category;
use quiver_package::workflow::{StepAction, Workflow};
use serde::{Deserialize, Serialize};

use crate::error::{Result, WorkflowError};

/// A workflow as pinned for its runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Definition {
    /// The package id.
    pub package: String,
    /// The parsed workflow.
    pub workflow: Workflow,
    /// One entry per step, in order.
    pub steps: Vec<StepMeta>,
    /// The content digest of every package its steps run (its own, and the packages of the
    /// `pkg.tool` and `pkg.agent` steps), by package id, as loaded where its runs were started
    /// ([`Definition::pinned`]): an engine drives its runs only where every one of them is
    /// loaded ([`crate::pins`]). Empty for a definition stored before packages were pinned
    /// (its runs run anywhere, as they did) and left out of its JSON then, so its digest stays.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub packages: BTreeMap<String, String>,
}

/// What the engine knows of one step's target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepMeta {
    /// The qualified tool or agent (`pkg.item`) of a tool or agent step.
    pub target: Option<String>,
    /// Whether an attempt found started without a result after a crash may run again without
    /// asking: a `perception` or `decision` tool, or one that declares `idempotent: true`.
    /// Agents and other action tools wait `in_doubt` for an operator.
    pub rerun_safe: bool,
}

/// What the catalog tells about a tool of another package: whether it is re-run safe.
pub type RerunSafe<'a> = &'a dyn Fn(&str) -> Option<bool>;

impl Definition {
    /// The definition of `workflow` of `package`. `other` answers for the tools of other
    /// packages (`pkg.tool`), `None` when it does not know one (it is then not re-run safe).
    pub fn new(package: &Package, workflow: &Workflow, other: RerunSafe<'_>) -> Definition {
        let steps = workflow
            .steps
            .iter()
            .map(|step| match &step.action {
                StepAction::Tool { name, .. } => match package.tool(name) {
                    Some(tool) if !name.contains('.') => StepMeta {
                        target: Some(format!("{}.{name}", package.id)),
                        rerun_safe: tool.idempotent
                            || matches!(tool.category, Category::Perception | Category::Decision),
                    },
                    _ => StepMeta {
                        target: Some(name.clone()),
                        rerun_safe: other(name).unwrap_or(false),
                    },
                },
                StepAction::Agent { name, .. } => StepMeta {
                    target: Some(if name.contains('.') {
                        name.clone()
                    } else {
                        format!("{}.{name}", package.id)
                    }),
                    rerun_safe: false,
                },
                StepAction::Approval { .. } | StepAction::Wait(_) => StepMeta {
                    target: None,
                    rerun_safe: true,
                },
            })
            .collect();
        Definition {
            package: package.id.to_string(),
            workflow: workflow.clone(),
            steps,
            packages: BTreeMap::new(),
        }
    }

    /// The ids of the packages its steps run: its own, and each step target's.
    pub fn target_packages(&self) -> BTreeSet<String> {
        let mut ids = BTreeSet::from([self.package.clone()]);
        for step in &self.steps {
            if let Some((package, _)) = step.target.as_deref().and_then(|t| t.split_once('.')) {
                ids.insert(package.to_owned());
            }
        }
        ids
    }

    /// This definition with every package of [`Definition::target_packages`] pinned to the
    /// content digest `loaded` gives for it (what this instance has loaded now). A package
    /// `loaded` does not know (not loaded here, or without a folder of its own) is not pinned:
    /// its step fails here as an unknown name, and would run anywhere it is known.
    pub fn pinned(mut self, loaded: &dyn Fn(&str) -> Option<String>) -> Definition {
        self.packages = self
            .target_packages()
            .into_iter()
            .filter_map(|id| loaded(&id).map(|digest| (id, digest)))
            .collect();
        self
    }

    /// `pkg.workflow`.
    pub fn qualified(&self) -> String {
        format!("{}.{}", self.package, self.workflow.name)
    }

    /// The JSON form stored in the definitions table.
    pub fn to_json(&self) -> Result<serde_json::Value> {
        serde_json::to_value(self).map_err(|e| WorkflowError::Definition {
            digest: String::new(),
            detail: e.to_string(),
        })
    }

    /// The sha256 of its canonical JSON: the name under which runs pin it.
    pub fn digest(&self) -> Result<String> {
        Ok(quiver_store::argument_digest(&self.to_json()?, &[]))
    }

    /// Reads a stored definition.
    pub fn from_stored(stored: &quiver_store::workflow::Definition) -> Result<Definition> {
        serde_json::from_value(stored.body.clone()).map_err(|e| WorkflowError::Definition {
            digest: stored.digest.clone(),
            detail: e.to_string(),
        })
    }
}
