//! `quiver new`: scaffolds a skill, a tool or a package that `quiver lint` passes.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use quiver_package::names::check_name;

/// What to create.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Kind {
    /// A plain Agent Skills folder.
    Skill,
    /// A tool inside the package in `--dir`.
    Tool,
    /// A package with a manifest, a skill and one tool.
    Package,
}

/// Arguments of `quiver new`.
#[derive(Debug, clap::Args)]
pub struct NewArgs {
    /// What to create.
    pub kind: Kind,
    /// Its name (`[a-z0-9][a-z0-9_-]{0,63}`).
    pub name: String,
    /// Where: the parent folder for a skill or package, the package folder for a tool.
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
    /// Print `{"kind", "name", "path"}` as JSON on stdout instead of the path.
    #[arg(long)]
    pub json: bool,
}

/// Runs `quiver new`.
pub fn run(args: NewArgs) -> miette::Result<ExitCode> {
    check_name(&args.name)
        .map_err(|e| miette::miette!(help = "names match `[a-z0-9][a-z0-9_-]{{0,63}}`", "{e}"))?;
    let name = args.name.as_str();
    let created = match args.kind {
        Kind::Skill => {
            let dir = args.dir.join(name);
            ensure_new(&dir)?;
            write(&dir.join("SKILL.md"), &skill_md(name))?;
            dir
        }
        Kind::Tool => {
            let dir = args.dir.join("tools").join(name);
            ensure_new(&dir)?;
            write_tool(&dir, name)?;
            dir
        }
        Kind::Package => create_package(&args.dir, name)?,
    };
    if args.json {
        let kind = match args.kind {
            Kind::Skill => "skill",
            Kind::Tool => "tool",
            Kind::Package => "package",
        };
        crate::out(&serde_json::json!({"kind": kind, "name": name, "path": created}).to_string());
    } else {
        crate::out(&created.display().to_string());
    }
    Ok(ExitCode::SUCCESS)
}

/// Makes the package `name` under `parent` (a manifest, a skill and one tool), which `quiver
/// lint` passes; an error if the folder exists.
pub(super) fn create_package(parent: &Path, name: &str) -> miette::Result<PathBuf> {
    let dir = parent.join(name);
    ensure_new(&dir)?;
    write(
        &dir.join("quiver.yaml"),
        &format!(
            "id: {name}\nname: {name}\nversion: 0.1.0\ndescription: One line saying what {name} offers.\nlicense: Apache-2.0\npermissions: {{}}\n"
        ),
    )?;
    write(&dir.join("SKILL.md"), &skill_md(name))?;
    write(
        &dir.join("docs/README.md"),
        &format!("# {name}\n\nWhat this package does, for people.\n"),
    )?;
    write_tool(&dir.join("tools/hello"), "hello")?;
    Ok(dir)
}

fn skill_md(name: &str) -> String {
    format!(
        "---\nname: {name}\ndescription: Say what this skill does and when to use it, in one or two sentences.\n---\n\n# {name}\n\nInstructions the model reads when it opens this skill.\n"
    )
}

fn write_tool(dir: &Path, name: &str) -> miette::Result<()> {
    write(
        &dir.join("tool.yaml"),
        &format!(
            "name: {name}\nversion: 0.1.0\ndescription:\n  summary: Greet someone by name.\n  when_to_use: The user asks to be greeted.\ncategory: decision\nexpose: true\ninput:\n  type: object\n  properties:\n    who:\n      type: string\n      description: Whom to greet.\n  required: [who]\nexamples:\n  - query: greet Ada\n    arguments: {{who: Ada}}\nnegative_examples:\n  - delete all my files\nrun:\n  command: [python3, main.py]\n"
        ),
    )?;
    write(
        &dir.join("main.py"),
        "import json\nimport sys\n\nrequest = json.load(sys.stdin)\nwho = request[\"arguments\"].get(\"who\", \"world\")\nprint(json.dumps({\"greeting\": f\"Hello, {who}!\"}))\n",
    )
}

fn ensure_new(dir: &Path) -> miette::Result<()> {
    if dir.exists() {
        return Err(miette::miette!(
            help = "pick another name or remove it",
            "`{}` already exists",
            dir.display()
        ));
    }
    Ok(())
}

/// Writes `text` to `path`, making its folder.
pub(super) fn write(path: &Path, text: &str) -> miette::Result<()> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)
            .map_err(|e| miette::miette!("cannot create `{}`: {e}", parent.display()))?;
    }
    fs::write(path, text).map_err(|e| miette::miette!("cannot write `{}`: {e}", path.display()))
}
