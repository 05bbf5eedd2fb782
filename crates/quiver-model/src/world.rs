//! What the model reasons about: a catalog description (packages and their tools, skills,
//! agents and prompt sections), a caller, and the operations of a conversation.
//!
//! Names are small and fixed so that generated catalogs collide on purpose: every package's
//! root tools are `t0`, `t1`, ..., so a bare `allowed-tools: t0` names a tool in every package.

mod conversation;

pub use conversation::{Caller, NameForm, Op, Role, SCRIPT_TOOL, Script};

/// A whole catalog: packages `p0`, `p1`, ... in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct World {
    /// The packages; package `i` has id `p{i}`.
    pub packages: Vec<Package>,
}

/// One package folder.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Package {
    /// Root tools `tools/t{i}/`.
    pub tools: Vec<Tool>,
    /// The package's own skill (`SKILL.md`, id `p{i}`), if any.
    pub root_skill: Option<Skill>,
    /// Further skills `skills/s{i}/SKILL.md` (id `p{k}/s{i}`).
    pub skills: Vec<Skill>,
    /// Agents `agents/a{i}.md`.
    pub agents: Vec<Agent>,
    /// Prompt sections `prompts/r{i}.md`.
    pub prompts: Vec<Prompt>,
    /// Workflows `workflows/w{i}.yaml`.
    pub workflows: Vec<Workflow>,
}

/// A workflow's declarations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workflow {
    /// `expose: true`: callable like a tool, starting a run.
    pub expose: bool,
    /// Its steps, naming anything.
    pub steps: Vec<Step>,
}

/// A workflow step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// `tool: p{k}.{name}`.
    Tool(Ref),
    /// `agent: p{k}.{name}`.
    Agent(Ref),
    /// `approval: ...`.
    Approval,
}

/// A tool's declarations that the rules read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tool {
    /// `expose: true`.
    pub expose: bool,
    /// `hidden: true`: never listed or found, callable by its exact name.
    pub hidden: bool,
    /// `category`.
    pub category: Category,
    /// `approval`.
    pub approval: Approval,
    /// `risk: dangerous` (with `risk_category: member`).
    pub dangerous: bool,
    /// Who and where may call it.
    pub restrict: Restrict,
    /// Whether its input has a `secret: true` field `token` (never in the audit).
    pub secret: bool,
}

/// `category` of a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Category {
    /// Changes the world.
    Action,
    /// Only reads.
    Perception,
    /// Only reasons.
    Decision,
}

/// `approval` of a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approval {
    /// No confirmation.
    Never,
    /// Confirm `action` tools (generated tools declare no open-ended permission).
    OnRisk,
    /// Confirm the first call per session.
    Once,
    /// Confirm every call.
    Always,
    /// Every call needs a person.
    Human,
}

/// A tool's or a skill's restriction (`permissions`, `scopes`, `platforms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restrict {
    /// None.
    None,
    /// `permissions: ['role(master)']`.
    Master,
    /// `scopes: [group]`.
    Group,
    /// `platforms: [qq]` (such a tool is resident once admitted).
    Qq,
}

/// A reference from one package's file to an item anywhere: `p{package}.{name}`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Ref {
    /// The package index.
    pub package: usize,
    /// The item's local name (`t0`, `k0`, `a1`, ...).
    pub name: String,
}

impl Ref {
    /// `p{package}.{name}`.
    pub fn qualified(&self) -> String {
        format!("p{}.{}", self.package, self.name)
    }
}

/// An entry of `allowed-tools` or `disallowed-tools`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListEntry {
    /// A bare local name: that name in any package.
    Bare(String),
    /// `<package>.<tool>`.
    Qualified(Ref),
}

/// A skill's declarations that the rules read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// `permissions: ['role(master)']` when `Master`; `scopes: [group]` when `Group`.
    pub restrict: Restrict,
    /// `tools:` as written (local names or qualified names of anything), or none.
    pub tools: Option<Vec<String>>,
    /// `allowed-tools`.
    pub allowed: Vec<ListEntry>,
    /// `disallowed-tools`.
    pub disallowed: Vec<ListEntry>,
    /// `context: fork` with `agent:` naming this agent (anywhere).
    pub fork: Option<Ref>,
    /// Its own tools `skills/<s>/tools/k{i}/` (the root skill has none).
    pub scoped: Vec<Tool>,
    /// Whether it carries a script, `scripts/go.sh` under its folder.
    pub script: bool,
}

/// An agent's declarations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agent {
    /// `expose: true`: callable like a tool with `{task}`.
    pub expose: bool,
    /// `tools:` naming anything.
    pub tools: Vec<Ref>,
}

/// A prompt section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prompt {
    /// `retention: required` (else `preferred`).
    pub required: bool,
    /// `profiles:` (none: every profile).
    pub profile: Option<PromptProfile>,
}

/// A prompt section's single declared profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptProfile {
    /// `profiles: [interactive]`.
    Interactive,
    /// `profiles: [schedule]`.
    Schedule,
}

/// What a tool or agent of the world is, as a call names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Target {
    /// Root tool `i` of a package.
    Tool(usize, usize),
    /// Scoped tool `k` of skill `s` (`skills/s{s}/tools/k{k}`) of a package.
    Scoped(usize, usize, usize),
    /// Agent `a` of a package.
    Agent(usize, usize),
    /// Workflow `w` of a package.
    Workflow(usize, usize),
    /// The scripts of a package's skills, run by `run_skill_script`: one `action` call target
    /// of that package, `p{p}.run_skill_script`, as the runtime names it in the policy.
    Script(usize),
}

impl Target {
    /// The package index.
    pub fn package(&self) -> usize {
        match *self {
            Target::Tool(p, _)
            | Target::Scoped(p, _, _)
            | Target::Agent(p, _)
            | Target::Workflow(p, _)
            | Target::Script(p) => p,
        }
    }

    /// The local name.
    pub fn local(&self) -> String {
        match *self {
            Target::Tool(_, t) => format!("t{t}"),
            Target::Scoped(_, s, k) => format!("s{s}k{k}"),
            Target::Agent(_, a) => format!("a{a}"),
            Target::Workflow(_, w) => format!("w{w}"),
            Target::Script(_) => SCRIPT_TOOL.to_owned(),
        }
    }

    /// `p{p}.{local}`.
    pub fn qualified(&self) -> String {
        format!("p{}.{}", self.package(), self.local())
    }

    /// `p{p}__{local}`.
    pub fn wire(&self) -> String {
        format!("p{}__{}", self.package(), self.local())
    }

    /// The name a call of the given form uses.
    pub fn named(&self, form: NameForm) -> String {
        match form {
            NameForm::Wire => self.wire(),
            NameForm::Qualified => self.qualified(),
        }
    }
}

impl World {
    /// The tool a target names, if it exists.
    pub fn tool(&self, target: &Target) -> Option<&Tool> {
        let package = self.packages.get(target.package())?;
        match *target {
            Target::Tool(_, t) => package.tools.get(t),
            Target::Scoped(_, s, k) => package.skills.get(s)?.scoped.get(k),
            Target::Agent(..) | Target::Workflow(..) | Target::Script(_) => None,
        }
    }

    /// The agent a target names, if it exists.
    pub fn agent(&self, target: &Target) -> Option<&Agent> {
        match *target {
            Target::Agent(p, a) => self.packages.get(p)?.agents.get(a),
            _ => None,
        }
    }

    /// The workflow a target names, if it exists.
    pub fn workflow(&self, target: &Target) -> Option<&Workflow> {
        match *target {
            Target::Workflow(p, w) => self.packages.get(p)?.workflows.get(w),
            _ => None,
        }
    }

    /// Whether an agent or workflow target is exposed (`None` for tools and missing items).
    pub fn exposed_item(&self, target: &Target) -> Option<bool> {
        self.agent(target)
            .map(|a| a.expose)
            .or_else(|| self.workflow(target).map(|w| w.expose))
    }

    /// Whether the target exists.
    pub fn exists(&self, target: &Target) -> bool {
        self.tool(target).is_some() || self.exposed_item(target).is_some()
    }

    /// Every target of the world, in catalog order.
    pub fn targets(&self) -> Vec<Target> {
        let mut out = Vec::new();
        for (p, package) in self.packages.iter().enumerate() {
            out.extend((0..package.tools.len()).map(|t| Target::Tool(p, t)));
            for (s, skill) in package.skills.iter().enumerate() {
                out.extend((0..skill.scoped.len()).map(|k| Target::Scoped(p, s, k)));
            }
            out.extend((0..package.agents.len()).map(|a| Target::Agent(p, a)));
            out.extend((0..package.workflows.len()).map(|w| Target::Workflow(p, w)));
        }
        out
    }

    /// Workflow `i` of the catalog's workflows in catalog order, counting on from the first
    /// past the last: `(package, workflow)`; `None` when the catalog has none.
    pub fn nth_workflow(&self, i: usize) -> Option<(usize, usize)> {
        let all: Vec<(usize, usize)> = self
            .targets()
            .into_iter()
            .filter_map(|t| match t {
                Target::Workflow(p, w) => Some((p, w)),
                _ => None,
            })
            .collect();
        (!all.is_empty()).then(|| all[i % all.len()])
    }

    /// The target a qualified name (`p0.t1`, `p0.run_skill_script`) names, if it exists.
    pub fn resolve(&self, qualified: &str) -> Option<Target> {
        let script = (0..self.packages.len()).map(Target::Script);
        self.targets()
            .into_iter()
            .chain(script)
            .find(|t| t.qualified() == qualified)
    }

    /// The skill with id `p{p}` or `p{p}/s{s}`, with its package index and its index among
    /// `skills` (`None` for the root skill).
    pub fn skill(&self, id: &str) -> Option<(usize, Option<usize>, &Skill)> {
        let (package, rest) = match id.split_once('/') {
            Some((p, s)) => (p, Some(s)),
            None => (id, None),
        };
        let p: usize = package.strip_prefix('p')?.parse().ok()?;
        let pkg = self.packages.get(p)?;
        match rest {
            None => pkg.root_skill.as_ref().map(|s| (p, None, s)),
            Some(s) => {
                let s: usize = s.strip_prefix('s')?.parse().ok()?;
                pkg.skills.get(s).map(|skill| (p, Some(s), skill))
            }
        }
    }
}
