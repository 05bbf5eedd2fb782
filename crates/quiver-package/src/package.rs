//! One package folder read into a [`Package`], with every diagnostic.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::agent::{self, Agent, AgentPrompt};
use crate::diagnostic::Diagnostic;
use crate::manifest::{self, Manifest};
use crate::names::{ItemName, PackageId, RESERVED_SKILL_NAMES};
use crate::prompt::{self, PromptSection};
use crate::skill::{self, Skill};
use crate::source::PackageDir;
use crate::tool::{self, Tool, ToolScope};
use crate::unlocks;
use crate::workflow::{self, Workflow, WorkflowScope};
use crate::{skill_files, skill_lint};

/// A loaded package.
#[derive(Debug, Clone, Serialize)]
pub struct Package {
    /// Its id.
    pub id: PackageId,
    /// Display name (the manifest's `name`, the skill's name, or the id).
    pub name: String,
    /// Version, when declared.
    pub version: Option<semver::Version>,
    /// One line for the catalog.
    pub description: String,
    /// Its folder.
    pub root: PathBuf,
    /// `quiver.yaml` (defaults when the folder has none).
    pub manifest: Manifest,
    /// Whether the folder has a `quiver.yaml`.
    pub has_manifest: bool,
    /// The package's own skill (`SKILL.md` or `skill/SKILL.md`).
    pub skill: Option<Skill>,
    /// Further skills (`skills/<skill>/SKILL.md`).
    pub skills: Vec<Skill>,
    /// Every tool: root, skill-scoped and agent-scoped.
    pub tools: Vec<Tool>,
    /// Agents.
    pub agents: Vec<Agent>,
    /// Workflows.
    pub workflows: Vec<Workflow>,
    /// Prompt sections.
    pub prompts: Vec<PromptSection>,
    /// `AGENTS.md`: rules for all of the package's agents.
    pub agents_md: Option<String>,
    /// `requirements.txt` entries.
    pub requirements: Vec<String>,
    /// The `pages/` folder, when present.
    pub pages: Option<PathBuf>,
    /// `docs/README.md`, the package page, when present.
    pub readme: Option<PathBuf>,
}

impl Package {
    /// Every skill: the package's own first, then the further ones.
    pub fn all_skills(&self) -> impl Iterator<Item = &Skill> {
        self.skill.iter().chain(&self.skills)
    }

    /// The tool with local name `name`.
    pub fn tool(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|t| t.name.as_str() == name)
    }
}

/// The result of loading one folder.
#[derive(Debug)]
pub struct Loaded {
    /// The package, unless an error in its manifest stopped it.
    pub package: Option<Package>,
    /// Everything found wrong, in file order.
    pub diagnostics: Vec<Diagnostic>,
}

/// Whether `dir` looks like a package (a `quiver.yaml`, `SKILL.md` or `skill/SKILL.md`).
pub fn is_package_dir(dir: &Path) -> bool {
    dir.join("quiver.yaml").is_file()
        || dir.join("SKILL.md").is_file()
        || dir.join("skill/SKILL.md").is_file()
}

/// The entries of a folder, listed once. A package has many optional files and folders, most of
/// them absent; asking the listing first spares a system call for each absent one.
struct Listing {
    /// Names and types (not following links), or `None` when the folder could not be listed.
    entries: Option<Vec<(OsString, Option<fs::FileType>)>>,
}

impl Listing {
    fn read(dir: &Path) -> Listing {
        let entries = fs::read_dir(dir).ok().and_then(|read| {
            read.map(|e| e.map(|e| (e.file_name(), e.file_type().ok())))
                .collect::<Result<Vec<_>, _>>()
                .ok()
        });
        Listing { entries }
    }

    /// Whether `name` may exist in the folder: `false` only when the listing has no entry of
    /// that name (compared ignoring ASCII case, as case-insensitive file systems would).
    fn may_have(&self, name: &str) -> bool {
        self.entries.as_ref().is_none_or(|entries| {
            entries
                .iter()
                .any(|(n, _)| n.to_str().is_some_and(|n| n.eq_ignore_ascii_case(name)))
        })
    }

    /// `dir.join(name).is_file()`, answered from the listing when it can be.
    fn is_file(&self, dir: &Path, name: &str) -> bool {
        let exact = self
            .entries
            .iter()
            .flatten()
            .find(|(n, _)| n.as_os_str() == name);
        match exact.and_then(|(_, kind)| *kind) {
            Some(kind) if kind.is_file() => true,
            Some(kind) if kind.is_dir() => false,
            _ => self.may_have(name) && dir.join(name).is_file(),
        }
    }
}

/// Loads the package in `dir`. Item-level errors drop that item; the rest still loads.
pub fn load_package(dir: &Path) -> Loaded {
    let mut diags = Vec::new();
    let dir_name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let listing = Listing::read(dir);
    let files = PackageDir::new(dir);

    let manifest_file = dir.join("quiver.yaml");
    let has_manifest = listing.is_file(dir, "quiver.yaml");
    let manifest = if has_manifest {
        let parsed = files
            .read_text(&manifest_file)
            .map(|text| manifest::parse_manifest(&text, &manifest_file));
        match parsed {
            Ok((Some(m), d)) => {
                diags.extend(d);
                m
            }
            Ok((None, d)) => {
                diags.extend(d);
                return Loaded {
                    package: None,
                    diagnostics: diags,
                };
            }
            Err(d) => {
                return Loaded {
                    package: None,
                    diagnostics: vec![d],
                };
            }
        }
    } else {
        Manifest::default()
    };

    // The package's own skill.
    let nested_skill = || listing.may_have("skill") && dir.join("skill/SKILL.md").is_file();
    let (skill_file, skill_dir, has_skill) = if listing.is_file(dir, "SKILL.md") {
        if nested_skill() {
            diags.push(Diagnostic::warning(
                "package-two-skills",
                dir.join("skill/SKILL.md"),
                "both `SKILL.md` and `skill/SKILL.md` exist; `skill/SKILL.md` is ignored",
            ));
        }
        (dir.join("SKILL.md"), dir.to_path_buf(), true)
    } else {
        (
            dir.join("skill/SKILL.md"),
            dir.join("skill"),
            nested_skill(),
        )
    };
    let own_skill = if has_skill {
        read_skill(&files, &skill_file, Some(&dir_name), &mut diags)
    } else {
        None
    };

    let id = match (&manifest.id, &own_skill) {
        (Some(id), _) => id.clone(),
        (None, Some(parsed)) if !has_manifest => PackageId::derive(&parsed.name),
        _ => PackageId::derive(&dir_name),
    };
    let name = manifest
        .name
        .clone()
        .or_else(|| own_skill.as_ref().map(|s| s.name.clone()))
        .unwrap_or_else(|| id.to_string());
    let mut skill = own_skill.map(|parsed| {
        finish_skill(
            &files,
            parsed,
            id.to_string(),
            skill_file.clone(),
            skill_dir.clone(),
            &mut diags,
        )
    });

    // The path of `name` in the package folder, unless the listing tells that it is absent.
    let present = |name: &str| listing.may_have(name).then(|| dir.join(name));

    let mut tools = Vec::new();
    if let Some(tools_dir) = present("tools") {
        load_tools(
            &files,
            &tools_dir,
            ToolScope::Package,
            &mut tools,
            &mut diags,
        );
    }

    let mut skills = Vec::new();
    for sub in present("skills").map(|d| subdirs(&d)).unwrap_or_default() {
        let file = sub.join("SKILL.md");
        if !file.is_file() {
            continue;
        }
        let sub_name = sub
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let Some(parsed) = read_skill(&files, &file, Some(&sub_name), &mut diags) else {
            continue;
        };
        if RESERVED_SKILL_NAMES.contains(&sub_name.as_str()) {
            diags.push(Diagnostic::error(
                "skill-name-reserved",
                &file,
                format!(
                    "`skills/{sub_name}` uses a folder name of the package format as a skill name"
                ),
            ));
            continue;
        }
        let local = ItemName::derive(&parsed.name);
        let skill = finish_skill(
            &files,
            parsed,
            format!("{id}/{local}"),
            file,
            sub.clone(),
            &mut diags,
        );
        load_tools(
            &files,
            &sub.join("tools"),
            ToolScope::Skill(skill.id.clone()),
            &mut tools,
            &mut diags,
        );
        skills.push(skill);
    }
    dedupe(
        &mut skills,
        |s| s.id.clone(),
        |s| s.file.clone(),
        "skill-duplicate",
        &mut diags,
    );

    let mut agents = Vec::new();
    for entry in present("agents").map(|d| entries(&d)).unwrap_or_default() {
        if let Some(agent) = load_agent(&files, &entry, &id, &mut tools, &mut diags) {
            agents.push(agent);
        }
    }

    let local_items = workflow_scope(&id, &manifest, &tools, &agents);
    let mut workflows = present("workflows")
        .map(|d| load_workflows(&files, &d, &local_items, &mut diags))
        .unwrap_or_default();
    for agent in &mut agents {
        let agent_dir = dir.join("agents").join(agent.name.as_str());
        agent.own_workflows = load_workflows(
            &files,
            &agent_dir.join("workflows"),
            &local_items,
            &mut diags,
        );
    }

    let mut prompts = Vec::new();
    for file in present("prompts")
        .map(|d| files_with_ext(&d, "md"))
        .unwrap_or_default()
    {
        let Some(name) = item_name_of(&file, &mut diags) else {
            continue;
        };
        match files.read_text(&file) {
            Ok(text) => {
                let (section, d) = prompt::parse_prompt(&text, &file, name);
                diags.extend(d);
                prompts.extend(section);
            }
            Err(d) => diags.push(d),
        }
    }

    // Tools, agents and workflows share one namespace: `<package>.<item>`.
    check_item_names(&mut tools, &mut agents, &mut workflows, &mut diags);
    tools.retain(|t| {
        let Some(arg) = tool::entry_outside_package(t, &files) else {
            return true;
        };
        diags.push(
            Diagnostic::error(
                "tool-entry-outside-package",
                &t.file,
                format!("the tool's `run` names `{arg}`, a file outside the package folder"),
            )
            .with_help("keep the tool's scripts inside its package; programs from the `PATH` (`python3`) are fine"),
        );
        false
    });
    tools.retain(|t| {
        let excess = t.permission.excess_over(&manifest.permissions);
        if excess.is_empty() {
            return true;
        }
        diags.push(
            Diagnostic::error(
                "tool-permission-exceeds-package",
                &t.file,
                format!(
                    "the tool asks for {} beyond the package's `permissions`",
                    excess.join(", ")
                ),
            )
            .with_help(
                "add the entries to `permissions` in quiver.yaml, or remove them from the tool",
            ),
        );
        false
    });
    resolve_unlocks(
        &id,
        &mut skill,
        &mut skills,
        &tools,
        &mut agents,
        &workflows,
        &mut diags,
    );

    let agents_md = present("AGENTS.md").and_then(|file| optional_text(&files, &file, &mut diags));
    let requirements = present("requirements.txt")
        .and_then(|file| optional_text(&files, &file, &mut diags))
        .map(|text| parse_requirements(&text, &dir.join("requirements.txt"), &mut diags))
        .unwrap_or_default();
    let pages = present("pages").filter(|p| p.is_dir());
    let readme = present("docs")
        .map(|docs| docs.join("README.md"))
        .filter(|p| p.is_file());

    let description = manifest
        .description
        .clone()
        .or_else(|| skill.as_ref().map(|s| tool::first_sentence(&s.description)))
        .unwrap_or_default();
    let exposes = tools.iter().any(|t| t.expose && !t.hidden)
        || agents.iter().any(|a| a.expose)
        || workflows.iter().any(|w| w.expose);
    if !exposes && skill.is_none() && skills.is_empty() {
        diags.push(
            Diagnostic::warning("package-exposes-nothing", if has_manifest { manifest_file } else { dir.to_path_buf() }, "the package has no skill and exposes no tool, agent or workflow, so it never appears in the catalog")
                .with_help("add `expose: true` to the tools the model should use"),
        );
    }

    let package = Package {
        id,
        name,
        version: manifest.version.clone(),
        description,
        root: dir.to_path_buf(),
        manifest,
        has_manifest,
        skill,
        skills,
        tools,
        agents,
        workflows,
        prompts,
        agents_md,
        requirements,
        pages,
        readme,
    };
    Loaded {
        package: Some(package),
        diagnostics: diags,
    }
}

/// The skills an MCP server offered, mirrored in `dir` (`<dir>/<skill>/SKILL.md`, see
/// `quiver_mcp_client::skills`) under the folder `root` of the server's package `package`:
/// skills `<package>/<skill>` with [`Skill::from_server`] set to `server`, their files listed
/// and their instructions linted as any skill's. Nothing else in those folders is loaded: no
/// tool, agent or workflow comes from a server's skill.
pub fn load_mirrored_skills(
    root: &Path,
    dir: &Path,
    package: &PackageId,
    server: &str,
) -> (Vec<Skill>, Vec<Diagnostic>) {
    let files = PackageDir::new(root);
    let mut diags = Vec::new();
    let mut skills = Vec::new();
    for sub in subdirs(dir) {
        let file = sub.join("SKILL.md");
        if !file.is_file() {
            continue;
        }
        // The folder's name is Quiver's (derived from the skill's name), not the author's: no
        // name/folder mismatch to report.
        let Some(parsed) = read_skill(&files, &file, None, &mut diags) else {
            continue;
        };
        let local = ItemName::derive(&parsed.name);
        let id = format!("{package}/{local}");
        let mut skill = finish_skill(&files, parsed, id, file, sub, &mut diags);
        skill.from_server = Some(server.to_owned());
        skills.push(skill);
    }
    dedupe(
        &mut skills,
        |s| s.id.clone(),
        |s| s.file.clone(),
        "skill-duplicate",
        &mut diags,
    );
    (skills, diags)
}

/// Sets every skill's [`Skill::unlocks`] from its `tools:` (see [`crate::unlocks`]).
fn resolve_unlocks(
    id: &PackageId,
    skill: &mut Option<Skill>,
    skills: &mut [Skill],
    tools: &[Tool],
    agents: &mut [Agent],
    workflows: &[Workflow],
    diags: &mut Vec<Diagnostic>,
) {
    // An agent's own skills are taken out while the agents are read as items.
    let mut agent_skills: Vec<Vec<Skill>> = agents
        .iter_mut()
        .map(|a| std::mem::take(&mut a.own_skills))
        .collect();
    let items = unlocks::PackageItems {
        id,
        tools,
        agents,
        workflows,
    };
    for s in skill.iter_mut().chain(skills.iter_mut()) {
        let own = tools
            .iter()
            .filter(|t| t.scope == ToolScope::Skill(s.id.clone()))
            .map(|t| t.name.to_string())
            .collect();
        unlocks::resolve(s, own, &items, diags);
    }
    for s in agent_skills.iter_mut().flatten() {
        // Set by `load_agent` to the tools of the skill's own folder.
        let own = std::mem::take(&mut s.unlocks);
        unlocks::resolve(s, own, &items, diags);
    }
    for (agent, own_skills) in agents.iter_mut().zip(agent_skills) {
        agent.own_skills = own_skills;
    }
}

fn read_skill(
    files: &PackageDir,
    file: &Path,
    dir_name: Option<&str>,
    diags: &mut Vec<Diagnostic>,
) -> Option<skill::ParsedSkill> {
    match files.read_text(file) {
        Ok(text) => {
            let (parsed, d) = skill::parse_skill(&text, file, dir_name);
            diags.extend(d);
            parsed
        }
        Err(d) => {
            diags.push(d);
            None
        }
    }
}

/// The skill `parsed` as loaded: its files listed, its instructions linted
/// ([`crate::skill_lint`]).
fn finish_skill(
    package: &PackageDir,
    parsed: skill::ParsedSkill,
    id: String,
    file: PathBuf,
    dir: PathBuf,
    diags: &mut Vec<Diagnostic>,
) -> Skill {
    let files = skill_files::list(package, &dir);
    diags.extend(skill_lint::check(
        package,
        &file,
        &dir,
        &parsed.body,
        parsed.body_line,
    ));
    Skill {
        id,
        name: parsed.name,
        description: parsed.description,
        file,
        dir,
        frontmatter: parsed.frontmatter,
        body_line: parsed.body_line,
        body: parsed.body,
        unlocks: Vec::new(),
        package_root: package.path().to_path_buf(),
        from_server: None,
        meta: parsed.meta,
        files,
    }
}

fn load_tools(
    files: &PackageDir,
    dir: &Path,
    scope: ToolScope,
    tools: &mut Vec<Tool>,
    diags: &mut Vec<Diagnostic>,
) {
    for sub in subdirs(dir) {
        let file = sub.join("tool.yaml");
        if !is_entry(&file) {
            let d = Diagnostic::warning(
                "tool-missing-file",
                &sub,
                "this tool folder has no `tool.yaml` and is skipped",
            );
            diags.push(match crate::foreign::tool_help(&sub) {
                Some(help) => d.with_help(help),
                None => d,
            });
            continue;
        }
        let dir_name = sub
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match files.read_text(&file) {
            Ok(text) => {
                let (tool, d) = tool::parse_tool(&text, &file, &dir_name, scope.clone());
                diags.extend(d);
                tools.extend(tool);
            }
            Err(d) => diags.push(d),
        }
    }
}

fn load_agent(
    files: &PackageDir,
    entry: &Path,
    package: &PackageId,
    tools: &mut Vec<Tool>,
    diags: &mut Vec<Diagnostic>,
) -> Option<Agent> {
    let is_dir = entry.is_dir();
    if !is_dir && entry.extension().is_none_or(|e| e != "md") {
        return None;
    }
    let name = item_name_of(entry, diags)?;
    let (file, meta, prompt) = if is_dir {
        let file = entry.join("agent.yaml");
        let text = match files.read_text(&file) {
            Ok(text) => text,
            Err(d) => {
                diags.push(d);
                return None;
            }
        };
        let (meta, d) = agent::parse_agent_yaml(&text, &file);
        diags.extend(d);
        let meta = meta?;
        let system = optional_text(files, &entry.join("system.md"), diags).unwrap_or_default();
        if system.trim().is_empty() {
            diags.push(Diagnostic::warning(
                "agent-empty-prompt",
                entry.join("system.md"),
                "the agent has no `system.md`",
            ));
        }
        for part in ["boundaries.md", "conventions.md"] {
            if !is_entry(&entry.join(part)) {
                diags.push(
                    Diagnostic::warning(
                        "agent-missing-file",
                        entry.join(part),
                        format!("the agent folder has no `{part}`"),
                    )
                    .with_help("a folder agent has four files: `agent.yaml`, `system.md`, `boundaries.md` (what it must not do) and `conventions.md` (how it works)"),
                );
            }
        }
        let prompt = AgentPrompt {
            system: system.trim().to_owned(),
            boundaries: optional_text(files, &entry.join("boundaries.md"), diags)
                .map(|t| t.trim().to_owned()),
            conventions: optional_text(files, &entry.join("conventions.md"), diags)
                .map(|t| t.trim().to_owned()),
        };
        (file, meta, prompt)
    } else {
        let text = match files.read_text(entry) {
            Ok(text) => text,
            Err(d) => {
                diags.push(d);
                return None;
            }
        };
        let (parsed, d) = agent::parse_agent_file(&text, entry);
        diags.extend(d);
        let (meta, prompt) = parsed?;
        (entry.to_path_buf(), meta, prompt)
    };
    let mut own_skills = Vec::new();
    if is_dir {
        load_tools(
            files,
            &entry.join("tools"),
            ToolScope::Agent(name.to_string()),
            tools,
            diags,
        );
        for sub in subdirs(&entry.join("skills")) {
            let skill_file = sub.join("SKILL.md");
            if !skill_file.is_file() {
                continue;
            }
            let sub_name = sub
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if let Some(parsed) = read_skill(files, &skill_file, Some(&sub_name), diags) {
                let local = ItemName::derive(&parsed.name);
                let skill = finish_skill(
                    files,
                    parsed,
                    format!("{package}/{name}/{local}"),
                    skill_file,
                    sub.clone(),
                    diags,
                );
                let before = tools.len();
                // Its tools are offered to its agent once the agent has read it.
                load_tools(
                    files,
                    &sub.join("tools"),
                    ToolScope::Skill(skill.id.clone()),
                    tools,
                    diags,
                );
                let mut skill = skill;
                skill.unlocks = tools[before..].iter().map(|t| t.name.to_string()).collect();
                own_skills.push(skill);
            }
        }
    }
    let list = |sub: &str| {
        let mut out = Vec::new();
        if is_dir {
            skill_files::walk(&entry.join(sub), sub, 0, &mut out);
        }
        out
    };
    Some(Agent {
        name,
        file,
        description: meta.description,
        model: meta.model,
        tools: meta.tools.0,
        skills: meta.skills.0,
        expose: meta.expose,
        max_turns: meta.max_turns,
        platforms: meta.platforms,
        prompt,
        own_skills,
        own_workflows: Vec::new(),
        hooks: list("hooks"),
        knowledge: list("knowledge"),
    })
}

/// What a workflow of the package may name: its tools (with their input schemas), its agents
/// and its settings.
fn workflow_scope(
    id: &PackageId,
    manifest: &Manifest,
    tools: &[Tool],
    agents: &[Agent],
) -> WorkflowScope {
    let mut items: BTreeSet<String> = tools.iter().map(|t| t.name.to_string()).collect();
    items.extend(agents.iter().map(|a| a.name.to_string()));
    let secret_settings: BTreeSet<String> = manifest.secret_settings().into_iter().collect();
    let settings = manifest
        .config
        .as_ref()
        .and_then(|c| c.get("properties"))
        .and_then(serde_json::Value::as_object)
        .map(|p| {
            p.keys()
                .filter(|k| !secret_settings.contains(*k))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    WorkflowScope {
        items,
        tool_inputs: tools
            .iter()
            .map(|t| (t.name.to_string(), t.input.clone()))
            .collect(),
        settings,
        secret_settings,
        packages: Some((
            id.to_string(),
            manifest
                .requires
                .packages
                .iter()
                .chain(&manifest.requires.mcp)
                .cloned()
                .collect(),
        )),
    }
}

fn load_workflows(
    files: &PackageDir,
    dir: &Path,
    local_items: &WorkflowScope,
    diags: &mut Vec<Diagnostic>,
) -> Vec<Workflow> {
    let mut out = Vec::new();
    for file in files_with_ext(dir, "yaml")
        .into_iter()
        .chain(files_with_ext(dir, "yml"))
    {
        let Some(name) = item_name_of(&file, diags) else {
            continue;
        };
        match files.read_text(&file) {
            Ok(text) => {
                let (w, d) = workflow::parse_workflow(&text, &file, name, local_items);
                diags.extend(d);
                out.extend(w);
            }
            Err(d) => diags.push(d),
        }
    }
    out
}

/// Drops every item whose name an earlier item (tool, then agent, then workflow) already took.
fn check_item_names(
    tools: &mut Vec<Tool>,
    agents: &mut Vec<Agent>,
    workflows: &mut Vec<Workflow>,
    diags: &mut Vec<Diagnostic>,
) {
    let mut seen: BTreeMap<String, PathBuf> = BTreeMap::new();
    let mut keep =
        |name: &ItemName, file: &Path, diags: &mut Vec<Diagnostic>| match seen.get(name.as_str()) {
            Some(first) => {
                diags.push(
                Diagnostic::error(
                    "item-duplicate-name",
                    file,
                    format!("`{name}` is already defined by {}", first.display()),
                )
                .with_help(
                    "tools, agents and workflows of one package share one namespace; rename one",
                ),
            );
                false
            }
            None => {
                seen.insert(name.to_string(), file.to_path_buf());
                true
            }
        };
    tools.retain(|t| keep(&t.name, &t.file, diags));
    agents.retain(|a| keep(&a.name, &a.file, diags));
    workflows.retain(|w| keep(&w.name, &w.file, diags));
}

fn dedupe<T>(
    items: &mut Vec<T>,
    key: impl Fn(&T) -> String,
    file: impl Fn(&T) -> PathBuf,
    code: &'static str,
    diags: &mut Vec<Diagnostic>,
) {
    let mut seen: BTreeMap<String, PathBuf> = BTreeMap::new();
    items.retain(|item| match seen.get(&key(item)) {
        Some(first) => {
            diags.push(Diagnostic::error(
                code,
                file(item),
                format!(
                    "`{}` is already defined by {}",
                    key(item),
                    Path::display(first)
                ),
            ));
            false
        }
        None => {
            seen.insert(key(item), file(item));
            true
        }
    });
}

/// The item name of a file or folder (its stem), or a diagnostic.
fn item_name_of(path: &Path, diags: &mut Vec<Diagnostic>) -> Option<ItemName> {
    let stem = path.file_stem()?.to_string_lossy();
    match stem.parse::<ItemName>() {
        Ok(name) => Some(name),
        Err(err) => {
            diags.push(
                Diagnostic::error("item-invalid-name", path, err.to_string())
                    .with_help("item names match `[a-z0-9][a-z0-9_-]{0,63}`"),
            );
            None
        }
    }
}

fn optional_text(files: &PackageDir, path: &Path, diags: &mut Vec<Diagnostic>) -> Option<String> {
    if !is_entry(path) {
        return None;
    }
    match files.read_text(path) {
        Ok(text) => Some(text),
        Err(d) => {
            diags.push(d);
            None
        }
    }
}

/// The requirements of `requirements.txt` (see [`crate::requirements`]); a line refused is a
/// diagnostic and is dropped.
fn parse_requirements(text: &str, file: &Path, diags: &mut Vec<Diagnostic>) -> Vec<String> {
    let (found, problems) = crate::requirements::parse(text);
    diags.extend(crate::requirements::diagnostics(&problems, file));
    found.into_iter().map(|r| r.text).collect()
}

/// Sub-folders of `dir` (links to folders included), sorted, skipping dot-folders.
fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(read) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = read
        .flatten()
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .filter(|e| match e.file_type() {
            Ok(kind) if !kind.is_symlink() => kind.is_dir(),
            _ => e.path().is_dir(),
        })
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

/// Entries of `dir`, sorted, skipping dot-entries.
fn entries(dir: &Path) -> Vec<PathBuf> {
    let Ok(read) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = read
        .flatten()
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

fn files_with_ext(dir: &Path, ext: &str) -> Vec<PathBuf> {
    entries(dir)
        .into_iter()
        .filter(|p| is_entry(p) && p.extension().is_some_and(|e| e == ext))
        .collect()
}

/// Whether `path` exists and is not a folder: a file to read, or to refuse with a diagnostic
/// (a link out of the package, a device, a FIFO) rather than skip in silence.
fn is_entry(path: &Path) -> bool {
    path.symlink_metadata().is_ok() && !path.is_dir()
}
