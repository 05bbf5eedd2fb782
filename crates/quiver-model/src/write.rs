//! Writes a [`World`] as real package folders (docs/package-format.md): `quiver.yaml`,
//! `tools/<t>/tool.yaml` with a tiny `run.command` script, `SKILL.md` and
//! `skills/<s>/SKILL.md` with their own `tools/` and `scripts/`, `agents/<a>.md`,
//! `workflows/<w>.yaml` and `prompts/<r>.md`.

use std::fs;
use std::io;
use std::path::Path;

use crate::world::{
    Agent, Approval, Category, ListEntry, Prompt, PromptProfile, Restrict, Skill, Step, Target,
    Tool, Workflow, World,
};

/// The words tool and package descriptions use, one per item, for `tool_search`.
pub const WORDS: [&str; 3] = ["apple", "river", "stone"];

/// The instructions of skill `id` (a forked skill's child gets them as its task).
pub fn skill_instructions(id: &str) -> String {
    format!("Follow the instructions of skill `{id}`.")
}

/// The text a prompt section carries, so a test can look for it in a system prompt.
pub fn section_marker(package: usize, section: usize) -> String {
    format!("SECTION-P{package}-R{section}")
}

/// Writes every package of `world` under `root` (`root/p0/`, `root/p1/`, ...).
pub fn write_world(world: &World, root: &Path) -> io::Result<()> {
    for (p, package) in world.packages.iter().enumerate() {
        let dir = root.join(format!("p{p}"));
        // Every package may name the others' items (workflow steps are checked when they run).
        let others: Vec<String> = (0..crate::generate::MAX_PACKAGES)
            .filter(|q| *q != p)
            .map(|q| format!("p{q}"))
            .collect();
        put(
            &dir.join("quiver.yaml"),
            &format!(
                "id: p{p}\nname: p{p}\ndescription: Package p{p} about {}\nrequires: {{packages: [{}]}}\n",
                WORDS[p % 3],
                others.join(", ")
            ),
        )?;
        for (t, tool) in package.tools.iter().enumerate() {
            write_tool(
                &dir.join(format!("tools/t{t}")),
                &format!("t{t}"),
                tool,
                p + t,
            )?;
        }
        if let Some(skill) = &package.root_skill {
            let id = format!("p{p}");
            put(&dir.join("SKILL.md"), &skill_md((&id, &id), skill, p))?;
            write_script(&dir, skill)?;
        }
        for (s, skill) in package.skills.iter().enumerate() {
            let sdir = dir.join(format!("skills/s{s}"));
            put(
                &sdir.join("SKILL.md"),
                &skill_md((&format!("s{s}"), &format!("p{p}/s{s}")), skill, p + s),
            )?;
            write_script(&sdir, skill)?;
            for (k, tool) in skill.scoped.iter().enumerate() {
                let name = format!("s{s}k{k}");
                write_tool(&sdir.join(format!("tools/{name}")), &name, tool, p + s + k)?;
            }
        }
        for (a, agent) in package.agents.iter().enumerate() {
            put(&dir.join(format!("agents/a{a}.md")), &agent_md(p, a, agent))?;
        }
        for (w, workflow) in package.workflows.iter().enumerate() {
            put(
                &dir.join(format!("workflows/w{w}.yaml")),
                &workflow_yaml(world, p, w, workflow),
            )?;
        }
        for (r, prompt) in package.prompts.iter().enumerate() {
            put(
                &dir.join(format!("prompts/r{r}.md")),
                &prompt_md(p, r, prompt),
            )?;
        }
    }
    Ok(())
}

fn put(path: &Path, text: &str) -> io::Result<()> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)?;
    }
    fs::write(path, text)
}

fn write_tool(dir: &Path, name: &str, tool: &Tool, word: usize) -> io::Result<()> {
    let category = match tool.category {
        Category::Action => "action",
        Category::Perception => "perception",
        Category::Decision => "decision",
    };
    let approval = match tool.approval {
        Approval::Never => "never",
        Approval::OnRisk => "on-risk",
        Approval::Once => "once",
        Approval::Always => "always",
        Approval::Human => "human",
    };
    let mut yaml = format!(
        "name: {name}\ndescription: Tool {name} handles {}\ncategory: {category}\napproval: {approval}\nexpose: {}\n",
        WORDS[word % 3],
        tool.expose
    );
    if tool.hidden {
        yaml.push_str("hidden: true\n");
    }
    if tool.dangerous {
        yaml.push_str("risk: dangerous\nrisk_category: member\n");
    }
    yaml.push_str(restriction(tool.restrict));
    yaml.push_str("input:\n  type: object\n  properties:\n    text: {type: string}\n");
    if tool.secret {
        yaml.push_str("    token: {type: string, secret: true}\n");
    }
    yaml.push_str("run: {command: [sh, run.sh]}\n");
    put(&dir.join("tool.yaml"), &yaml)?;
    put(
        &dir.join("run.sh"),
        "while read -r _; do :; done\necho '{\"ok\": true}'\n",
    )
}

/// The skill's `scripts/go.sh` under `dir`, when it has one: a trivial real script (the tests
/// run it in process, as the built-in `<package>.run_skill_script`).
fn write_script(dir: &Path, skill: &Skill) -> io::Result<()> {
    if !skill.script {
        return Ok(());
    }
    put(&dir.join("scripts/go.sh"), "echo ok\n")
}

fn restriction(restrict: Restrict) -> &'static str {
    match restrict {
        Restrict::None => "",
        Restrict::Master => "permissions: ['role(master)']\n",
        Restrict::Group => "scopes: [group]\n",
        Restrict::Qq => "platforms: [qq]\n",
    }
}

fn entry(e: &ListEntry) -> String {
    match e {
        ListEntry::Bare(name) => name.clone(),
        ListEntry::Qualified(r) => r.qualified(),
    }
}

/// The `SKILL.md` of skill `id` named `name`; its instructions name it, so a test can tell
/// which skill a fork's child runs.
fn skill_md((name, id): (&str, &str), skill: &Skill, word: usize) -> String {
    let mut md = format!(
        "---\nname: {name}\ndescription: Skill {name} about {}\n",
        WORDS[word % 3]
    );
    if !skill.allowed.is_empty() {
        let list: Vec<String> = skill.allowed.iter().map(entry).collect();
        md.push_str(&format!("allowed-tools: {}\n", list.join(" ")));
    }
    if !skill.disallowed.is_empty() {
        let list: Vec<String> = skill.disallowed.iter().map(entry).collect();
        md.push_str(&format!("disallowed-tools: [{}]\n", list.join(", ")));
    }
    if let Some(tools) = &skill.tools {
        md.push_str(&format!("tools: [{}]\n", tools.join(", ")));
    }
    md.push_str(restriction(skill.restrict));
    if let Some(agent) = &skill.fork {
        md.push_str(&format!("context: fork\nagent: {}\n", agent.qualified()));
    }
    md.push_str(&format!("---\n{}\n", skill_instructions(id)));
    md
}

fn agent_md(p: usize, a: usize, agent: &Agent) -> String {
    let tools: Vec<String> = agent.tools.iter().map(|r| r.qualified()).collect();
    format!(
        "---\ndescription: Agent a{a} of p{p} about {}\nexpose: {}\ntools: [{}]\n---\nYou are agent a{a} of p{p}.\n",
        WORDS[(p + a) % 3],
        agent.expose,
        tools.join(", ")
    )
}

fn prompt_md(p: usize, r: usize, prompt: &Prompt) -> String {
    let retention = if prompt.required {
        "required"
    } else {
        "preferred"
    };
    let profiles = match prompt.profile {
        None => "",
        Some(PromptProfile::Interactive) => "profiles: [interactive]\n",
        Some(PromptProfile::Schedule) => "profiles: [schedule]\n",
    };
    format!(
        "---\nretention: {retention}\n{profiles}---\n{} Keep answers short.\n",
        section_marker(p, r)
    )
}

/// The steps of workflow `workflow` of package `p` as written: a step naming a missing item
/// of its own package, or an item of the wrong kind, is left out (the loader refuses it), one
/// naming another package's is kept (checked when it runs); a workflow left with no step gets
/// one approval step.
pub fn written_steps(world: &World, p: usize, workflow: &Workflow) -> Vec<Step> {
    let mut steps: Vec<Step> = workflow
        .steps
        .iter()
        .filter(|step| {
            let r = match step {
                Step::Tool(r) | Step::Agent(r) => r,
                Step::Approval => return true,
            };
            let fits = matches!(
                (step, world.resolve(&r.qualified())),
                (Step::Tool(_), Some(Target::Tool(..) | Target::Scoped(..)))
                    | (Step::Agent(_), Some(Target::Agent(..)))
            );
            r.package != p || fits
        })
        .cloned()
        .collect();
    if steps.is_empty() {
        steps.push(Step::Approval);
    }
    steps
}

fn workflow_yaml(world: &World, p: usize, w: usize, workflow: &Workflow) -> String {
    let mut yaml = format!(
        "description: Workflow w{w} of p{p} about {}\nexpose: {}\nsteps:\n",
        WORDS[(p + w) % 3],
        workflow.expose
    );
    for step in written_steps(world, p, workflow) {
        match step {
            Step::Tool(r) => yaml.push_str(&format!(
                "  - tool: {}\n    with: {{text: x}}\n",
                r.qualified()
            )),
            Step::Agent(r) => {
                yaml.push_str(&format!("  - agent: {}\n    task: do it\n", r.qualified()));
            }
            Step::Approval => yaml.push_str("  - approval: Go on?\n"),
        }
    }
    yaml
}
