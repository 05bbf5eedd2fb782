//! Parity of `quiver skill` with the reference validator `agentskills` (skills-ref 0.1.1).
//!
//! Runs both CLIs on every skill of the shared corpus and on crafted bad inputs, and compares
//! exit code, stdout and stderr byte for byte (the reference's program name `agentskills` is
//! read as `quiver skill`). Where the reference crashes with a Python traceback (a few crafted
//! inputs), only the exit code and stdout are compared.
//!
//! Needs the reference installed: `scripts/install-test-deps.sh` (virtualenv at
//! `$QUIVER_TEST_VENV`, default `<repo>/.venv-test`).
//!
//! Speed: a reference process spends ~90 ms importing click and strictyaml, and there are
//! several hundred invocations. So most reference runs go through a fork server: one Python
//! process (the virtualenv's interpreter) imports `skills_ref.cli` once, then forks a child
//! per invocation that changes directory, points fd 1 and 2 at files and runs the console
//! script's entry point (`sys.exit(main())` with `sys.argv[0] == "agentskills"`): a real
//! process with real stdio, exit code and tracebacks. A sample of invocations also runs the
//! installed `agentskills` executable itself, as a cross-check of the fork server; set
//! `QUIVER_PARITY_DIRECT=1` to run all of them that way (slow).

#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::print_stdout)]

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

type TestResult = Result<(), Failure>;

/// A test failure, printed as is (the harness prints an `Err` with `Debug`).
struct Failure(String);

impl std::fmt::Debug for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<String> for Failure {
    fn from(message: String) -> Self {
        Failure(message)
    }
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The reference: the `agentskills` executable and the Python interpreter of its virtualenv.
struct Reference {
    program: PathBuf,
    python: PathBuf,
}

fn agentskills() -> Result<Reference, String> {
    let venv = std::env::var_os("QUIVER_TEST_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".venv-test"));
    let program = venv.join("bin").join("agentskills");
    let python = venv.join("bin").join("python");
    if program.is_file() && python.is_file() {
        Ok(Reference { program, python })
    } else {
        Err(format!(
            "the reference validator is not installed: {} is missing.\n\
             Run `scripts/install-test-deps.sh` (it creates the virtualenv $QUIVER_TEST_VENV, default <repo>/.venv-test).",
            program.display()
        ))
    }
}

fn corpus_root() -> PathBuf {
    repo_root().join("../shared/corpus/skills")
}

/// Skill directories (holding a `SKILL.md`) under `root`, relative to it, sorted.
fn skill_dirs(root: &Path) -> Result<Vec<PathBuf>, String> {
    let mut found = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for entry in entries {
            let path = entry.map_err(|e| e.to_string())?.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().is_some_and(|n| n == "SKILL.md")
                && let Some(parent) = path.parent()
            {
                found.push(
                    parent
                        .strip_prefix(root)
                        .map_err(|e| e.to_string())?
                        .to_path_buf(),
                );
            }
        }
    }
    found.sort();
    Ok(found)
}

/// One command line, run with both programs.
struct Invocation {
    label: String,
    cwd: PathBuf,
    /// Arguments after `agentskills` / `quiver skill`.
    args: Vec<OsString>,
    /// The reference may crash (traceback) on this input.
    may_crash: bool,
    /// Run the installed `agentskills` executable rather than the fork server.
    direct: bool,
}

impl Invocation {
    fn new(label: impl Into<String>, cwd: &Path, args: &[&str]) -> Self {
        Invocation {
            label: label.into(),
            cwd: cwd.to_path_buf(),
            args: args.iter().map(OsString::from).collect(),
            may_crash: false,
            direct: false,
        }
    }

    fn direct(mut self) -> Self {
        self.direct = true;
        self
    }
}

/// The fork server (see the module documentation).
const FORK_SERVER: &str = r#"
import json, os, sys, traceback
requests_path, out_dir, jobs = sys.argv[1], sys.argv[2], int(sys.argv[3])
sys.argv = ["agentskills"]
from skills_ref.cli import main
with open(requests_path, encoding="utf-8") as f:
    requests = json.load(f)
running, codes = {}, {}
def reap():
    pid, status = os.wait()
    codes[running.pop(pid)] = os.waitstatus_to_exitcode(status)
for i, request in enumerate(requests):
    while len(running) >= jobs:
        reap()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.chdir(request["cwd"])
            for fd, ext in ((1, "out"), (2, "err")):
                target = os.open(os.path.join(out_dir, "%d.%s" % (i, ext)), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(target, fd)
                os.close(target)
            sys.argv = ["agentskills"] + request["args"]
            try:
                sys.exit(main())
            except SystemExit as e:
                if e.code is None:
                    code = 0
                elif isinstance(e.code, int):
                    code = e.code
                else:
                    sys.stderr.write("%s\n" % e.code)
                    code = 1
            except BaseException:
                traceback.print_exc()
                code = 1
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
    running[pid] = i
while running:
    reap()
with open(os.path.join(out_dir, "codes.json"), "w") as f:
    json.dump([codes[i] for i in range(len(requests))], f)
"#;

/// Runs these invocations through the fork server.
fn run_fork_server(python: &Path, invocations: &[&Invocation]) -> Result<Vec<Output>, String> {
    let temp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let script = temp.path().join("fork_server.py");
    let requests = temp.path().join("requests.json");
    std::fs::write(&script, FORK_SERVER).map_err(|e| e.to_string())?;
    let list: Vec<serde_json::Value> = invocations
        .iter()
        .map(|i| {
            serde_json::json!({
                "cwd": i.cwd.to_string_lossy(),
                "args": i.args.iter().map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>(),
            })
        })
        .collect();
    std::fs::write(&requests, serde_json::Value::Array(list).to_string())
        .map_err(|e| e.to_string())?;
    let jobs = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .to_string();
    let status = Command::new(python)
        .arg(&script)
        .arg(&requests)
        .arg(temp.path())
        .arg(jobs)
        .status()
        .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    if !status.success() {
        return Err(format!("the fork server failed: {status}"));
    }
    let codes_text =
        std::fs::read_to_string(temp.path().join("codes.json")).map_err(|e| e.to_string())?;
    let codes: Vec<i32> = serde_json::from_str(&codes_text).map_err(|e| e.to_string())?;
    let read = |name: String| {
        std::fs::read(temp.path().join(name)).map(|b| String::from_utf8_lossy(&b).into_owned())
    };
    codes
        .iter()
        .enumerate()
        .map(|(i, code)| {
            Ok(Output {
                code: Some(*code),
                stdout: read(format!("{i}.out")).map_err(|e| e.to_string())?,
                stderr: read(format!("{i}.err")).map_err(|e| e.to_string())?,
            })
        })
        .collect()
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Output {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn run(program: &Path, prefix: &[&str], invocation: &Invocation) -> Result<Output, String> {
    let output = Command::new(program)
        .args(prefix)
        .args(&invocation.args)
        .current_dir(&invocation.cwd)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
    Ok(Output {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    })
}

/// The reference's output and quiver's, for one invocation.
type RunPair = Result<(Output, Output), String>;

#[derive(Default)]
struct Tally {
    compared: usize,
    crashes: usize,
    failures: Vec<String>,
    failed: Vec<usize>,
    direct: usize,
}

/// Runs every invocation with both programs and compares.
fn compare_all(
    invocations: &[Invocation],
    reference: &Reference,
) -> Result<(Tally, Vec<Output>), String> {
    let quiver = Path::new(env!("CARGO_BIN_EXE_quiver"));
    let all_direct = std::env::var_os("QUIVER_PARITY_DIRECT").is_some_and(|v| v == "1");
    let direct = |i: &Invocation| i.direct || all_direct;
    let served: Vec<&Invocation> = invocations.iter().filter(|i| !direct(i)).collect();
    let mut served_outputs = run_fork_server(&reference.python, &served)?.into_iter();
    let mut from_server: BTreeMap<usize, Output> = BTreeMap::new();
    for (index, invocation) in invocations.iter().enumerate() {
        if !direct(invocation) {
            from_server.insert(
                index,
                served_outputs
                    .next()
                    .ok_or("the fork server skipped an invocation")?,
            );
        }
    }
    let next = Mutex::new(0usize);
    let results: Mutex<BTreeMap<usize, RunPair>> = Mutex::new(BTreeMap::new());
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get()) * 2;
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let index = {
                        let Ok(mut next) = next.lock() else { return };
                        let index = *next;
                        *next += 1;
                        index
                    };
                    let Some(invocation) = invocations.get(index) else {
                        return;
                    };
                    let expected = match from_server.get(&index) {
                        Some(output) => Ok(output.clone()),
                        None => run(&reference.program, &[], invocation),
                    };
                    let pair = expected.and_then(|r| Ok((r, run(quiver, &["skill"], invocation)?)));
                    if let Ok(mut results) = results.lock() {
                        results.insert(index, pair);
                    }
                }
            });
        }
    });
    let results = results.into_inner().map_err(|e| e.to_string())?;
    let mut tally = Tally::default();
    let mut references = Vec::new();
    for (index, invocation) in invocations.iter().enumerate() {
        let (mut expected, actual) = results
            .get(&index)
            .cloned()
            .ok_or("an invocation did not run")??;
        expected.stderr = expected.stderr.replace("agentskills", "quiver skill");
        tally.compared += 1;
        tally.direct += usize::from(direct(invocation));
        let crashed = expected
            .stderr
            .contains("Traceback (most recent call last):");
        let same = if crashed {
            tally.crashes += 1;
            invocation.may_crash
                && expected.code == actual.code
                && expected.stdout == actual.stdout
                && !actual.stderr.is_empty()
        } else {
            expected == actual
        };
        if !same {
            tally.failed.push(index);
            tally.failures.push(format!(
                "{} (cwd {}, args {:?}){}\n--- agentskills: exit {:?}\nstdout:\n{}\nstderr:\n{}\n--- quiver skill: exit {:?}\nstdout:\n{}\nstderr:\n{}",
                invocation.label,
                invocation.cwd.display(),
                invocation.args,
                if crashed && !invocation.may_crash { " [unexpected reference crash]" } else { "" },
                expected.code,
                expected.stdout,
                expected.stderr,
                actual.code,
                actual.stdout,
                actual.stderr
            ));
        }
        references.push(expected);
    }
    Ok((tally, references))
}

fn report(what: &str, tally: &Tally) -> TestResult {
    println!(
        "{what}: {}/{} invocations identical ({} through the agentskills executable){}",
        tally.compared - tally.failures.len(),
        tally.compared,
        tally.direct,
        if tally.crashes > 0 {
            format!(
                " ({} reference crashes: exit code and stdout compared)",
                tally.crashes
            )
        } else {
            String::new()
        }
    );
    if tally.failures.is_empty() {
        Ok(())
    } else {
        Err(Failure(format!(
            "{} of {} invocations differ:\n\n{}",
            tally.failures.len(),
            tally.compared,
            tally.failures.join("\n\n")
        )))
    }
}

#[test]
fn corpus_matches_reference() -> TestResult {
    let reference = agentskills()?;
    let root = corpus_root();
    let dirs = skill_dirs(&root)?;
    if dirs.len() != 123 {
        return Err(Failure(format!(
            "expected 123 skills in {}, found {}",
            root.display(),
            dirs.len()
        )));
    }
    let names: Vec<String> = dirs
        .iter()
        .map(|d| d.to_string_lossy().into_owned())
        .collect();
    let mut invocations = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let validate = Invocation::new(format!("validate {name}"), &root, &["validate", name]);
        let read = Invocation::new(
            format!("read-properties {name}"),
            &root,
            &["read-properties", name],
        );
        // every 20th skill also through the installed executable
        invocations.push(if i % 20 == 0 {
            validate.direct()
        } else {
            validate
        });
        invocations.push(if i % 20 == 10 { read.direct() } else { read });
    }
    let (tally, outputs) = compare_all(&invocations, &reference)?;
    let valid = outputs
        .iter()
        .step_by(2)
        .filter(|o| o.code == Some(0))
        .count();
    let readable: Vec<&str> = names
        .iter()
        .zip(outputs.iter().skip(1).step_by(2))
        .filter(|(_, o)| o.code == Some(0))
        .map(|(n, _)| n.as_str())
        .collect();
    let identical = (0..names.len())
        .filter(|i| !tally.failed.contains(&(2 * i)) && !tally.failed.contains(&(2 * i + 1)))
        .count();
    println!(
        "corpus: {identical}/123 skills identical in validate and read-properties ({valid} valid, {} invalid; read-properties succeeds on {})",
        123 - valid,
        readable.len()
    );
    report("corpus validate + read-properties", &tally)?;

    let mut prompts = Vec::new();
    let all: Vec<&str> = names.iter().map(String::as_str).collect();
    prompts.push(
        Invocation::new(
            "to-prompt (all 123)",
            &root,
            &[&["to-prompt"], all.as_slice()].concat(),
        )
        .direct(),
    );
    prompts.push(Invocation::new(
        format!("to-prompt ({} readable skills)", readable.len()),
        &root,
        &[&["to-prompt"], readable.as_slice()].concat(),
    ));
    for name in readable.iter().step_by(40) {
        prompts.push(Invocation::new(
            format!("to-prompt {name}"),
            &root,
            &["to-prompt", name],
        ));
    }
    if let Some(first) = readable.first() {
        let skill_md = format!("{first}/SKILL.md");
        let absolute = root.join(first).to_string_lossy().into_owned();
        prompts.push(Invocation::new(
            "to-prompt via SKILL.md",
            &root,
            &["to-prompt", &skill_md],
        ));
        prompts
            .push(Invocation::new("to-prompt absolute", &root, &["to-prompt", &absolute]).direct());
        prompts.push(Invocation::new(
            "validate via SKILL.md",
            &root,
            &["validate", &skill_md],
        ));
        prompts.push(Invocation::new(
            "validate absolute",
            &root,
            &["validate", &absolute],
        ));
    }
    let (tally, _) = compare_all(&prompts, &reference)?;
    report("corpus to-prompt", &tally)
}

/// A crafted skill directory: its files, and whether the reference crashes on it.
struct Case {
    dir: String,
    files: Vec<(String, Vec<u8>)>,
    may_crash: bool,
}

fn skill(dir: &str, content: &str) -> Case {
    Case {
        dir: dir.into(),
        files: vec![("SKILL.md".into(), content.as_bytes().to_vec())],
        may_crash: false,
    }
}

fn crashing(dir: &str, content: &[u8]) -> Case {
    Case {
        dir: dir.into(),
        files: vec![("SKILL.md".into(), content.to_vec())],
        may_crash: true,
    }
}

fn named(dir: &str, name: &str) -> Case {
    skill(
        dir,
        &format!("---\nname: {name}\ndescription: A skill named {name}.\n---\nBody.\n"),
    )
}

fn crafted_cases() -> Vec<Case> {
    let long_name = "a".repeat(65);
    let max_name = "b".repeat(64);
    let mut cases = vec![
        skill(
            "valid",
            "---\nname: valid\ndescription: A valid skill. Use it for tests.\nlicense: MIT\ncompatibility: Needs python3\nallowed-tools: Bash(git:*) Read\nmetadata:\n  author: someone\n  version: \"1.0\"\n---\n# Valid\n",
        ),
        skill("missing-frontmatter", "# Title\n\nNo frontmatter here.\n"),
        skill("unclosed", "---\nname: unclosed\ndescription: never closed\n"),
        skill("mapping-values", "---\nname: mapping-values\ndescription: Use when: the user asks\n---\n"),
        skill("flow-seq", "---\nname: flow-seq\ndescription: x\nallowed-tools: [Read, Grep]\n---\n"),
        skill("flow-map", "---\nname: flow-map\ndescription: x\nmetadata: {a: b}\n---\n"),
        skill("tag", "---\nname: tag\ndescription: !!str tagged\n---\n"),
        skill("anchor", "---\nname: &n anchor\ndescription: x\n---\n"),
        skill("alias", "---\nname: alias\ndescription: *d\n---\n"),
        skill("duplicate-key", "---\nname: duplicate-key\ndescription: a\ndescription: b\n---\n"),
        skill("tab-indent", "---\nname: tab-indent\ndescription: x\nmetadata:\n\tauthor: me\n---\n"),
        skill("bad-indent", "---\nname: bad-indent\ndescription: x\n  license: MIT\n---\n"),
        skill("inconsistent-indent", "---\nname: inconsistent-indent\ndescription: x\nmetadata:\n  a: b\nlicense:\n    c: d\n---\n"),
        skill("quote-unclosed", "---\nname: quote-unclosed\ndescription: \"never closed\n---\n"),
        skill("apostrophe", "---\nname: apostrophe\ndescription: 'it's broken'\n---\n"),
        skill("simple-key", "---\nname: simple-key\ndescription: x\nno colon here\nlicense: MIT\n---\n"),
        skill("block-indicator", "---\nname: block-indicator\ndescription: |0\n  x\n---\n"),
        skill("bad-escape", "---\nname: bad-escape\ndescription: \"bad \\q escape\"\n---\n"),
        skill("at-sign", "---\nname: at-sign\ndescription: @mention\n---\n"),
        skill("long-line-error", &format!("---\nname: long-line-error\ndescription: {}: y\n---\n", "word ".repeat(20))),
        skill("multi-doc", "---\nname: multi-doc\ndescription: x\n...\nlicense: MIT\n---\n"),
        skill("doc-end", "---\nname: doc-end\ndescription: x\n...\n---\n"),
        skill("list-frontmatter", "---\n- a\n- b\n---\n"),
        skill("scalar-frontmatter", "---\njust text\n---\n"),
        skill("empty-frontmatter", "---\n---\nbody\n"),
        skill("comment-only", "---\n# nothing here\n---\n"),
        skill("name-list", "---\nname:\n  - a\ndescription: x\n---\n"),
        skill("name-empty", "---\nname:\ndescription: x\n---\n"),
        skill("name-blank", "---\nname: '   '\ndescription: x\n---\n"),
        skill("description-map", "---\nname: description-map\ndescription:\n  a: b\n---\n"),
        skill("description-empty", "---\nname: description-empty\ndescription: \"\"\n---\n"),
        skill("missing-name", "---\ndescription: x\n---\n"),
        skill("missing-description", "---\nname: missing-description\n---\n"),
        skill("missing-both", "---\nlicense: MIT\n---\n"),
        named(&long_name, &long_name),
        named(&max_name, &max_name),
        named("Upper-Case", "Upper-Case"),
        named("double--hyphen", "double--hyphen"),
        named("-leading", "-leading"),
        named("trailing-", "trailing-"),
        named("under_score", "under_score"),
        named("has space", "has space"),
        named("dot.name", "dot.name"),
        named("天气", "天气"),
        named("Ωmega", "Ωmega"),
        named("nfkc", "ｎｆｋｃ"),
        named("cafe\u{301}", "caf\u{e9}"),
        named("straße", "straße"),
        named("123", "123"),
        named("mismatch", "other-name"),
        named("with-é-mark", "with-e\u{301}-mark"),
        named("hindi-हिंदी", "hindi-हिंदी"),
        named("circled-ⓐ", "circled-ⓐ"),
        skill("unknown-fields", "---\nname: unknown-fields\ndescription: x\nzeta: 1\nalpha: 2\nwhen_to_use: later\n---\n"),
        skill("desc-too-long", &format!("---\nname: desc-too-long\ndescription: {}\n---\n", "d".repeat(1025))),
        skill("desc-1024", &format!("---\nname: desc-1024\ndescription: {}\n---\n", "d".repeat(1024))),
        skill("compat-too-long", &format!("---\nname: compat-too-long\ndescription: x\ncompatibility: {}\n---\n", "c".repeat(501))),
        skill("compat-list", "---\nname: compat-list\ndescription: x\ncompatibility:\n  - linux\n---\n"),
        Case { dir: "no-skill-md".into(), files: vec![("README.md".into(), b"# not a skill\n".to_vec())], may_crash: false },
        Case {
            dir: "lowercase-skill-md".into(),
            files: vec![("skill.md".into(), b"---\nname: lowercase-skill-md\ndescription: lower-case file name\n---\n".to_vec())],
            may_crash: false,
        },
        Case {
            dir: "both-skill-md".into(),
            files: vec![
                ("SKILL.md".into(), b"---\nname: both-skill-md\ndescription: upper\n---\n".to_vec()),
                ("skill.md".into(), b"---\nname: both-skill-md\ndescription: lower\n---\n".to_vec()),
            ],
            may_crash: false,
        },
        skill(
            "yaml-strings",
            "---\nname: yaml-strings\ndescription: yes\nlicense: 123\ncompatibility: null\nmetadata:\n  version: 1.0\n  flag: true\n  date: 2024-01-01\n  empty:\n  tilde: ~\n---\n",
        ),
        skill(
            "metadata-nested",
            "---\nname: metadata-nested\ndescription: x\nmetadata:\n  list:\n    - a\n    - it's\n  map:\n    k: v\n  quoted: '\"q\"'\n---\n",
        ),
        skill("metadata-empty", "---\nname: metadata-empty\ndescription: x\nmetadata:\n---\n"),
        skill("metadata-scalar", "---\nname: metadata-scalar\ndescription: x\nmetadata: text\n---\n"),
        skill("lists", "---\nname: lists\ndescription: x\nlicense:\n  - MIT\n  - Apache-2.0\nallowed-tools:\n  - Read\n  - Bash(git:*)\n---\n"),
        skill("html-escape", "---\nname: html-escape\ndescription: 'Use <b>tags</b> & \"quotes\" and ''apostrophes'''\n---\n"),
        skill("unicode-desc", "---\nname: unicode-desc\ndescription: 天气预报 — café 😀 \\ back\n---\n"),
        skill("crlf", "---\r\nname: crlf\r\ndescription: Windows line endings\r\n---\r\nbody\r\n"),
        skill("bom", "\u{feff}---\nname: bom\ndescription: x\n---\n"),
        skill("dashes-in-desc", "---\nname: dashes-in-desc\ndescription: a---b\n---\n"),
        skill(
            "block-scalars",
            "---\nname: block-scalars\ndescription: |\n  First line.\n  Second <line>.\n\nlicense: >-\n  folded\n  text\n---\n",
        ),
        skill("ansi", "---\nname: ansi\ndescription: \"\\e[31mred\\e[0m text\"\n---\n"),
        skill("merge-key", "---\n<<:\n  license: MIT\nname: merge-key\ndescription: x\nmetadata:\n  <<:\n    a: b\n  c: d\n---\n"),
        skill("comments", "---\n# leading comment\nname: comments  # trailing\n\ndescription: >\n  folded # not a comment\n# between\nlicense: MIT\n---\n"),
        skill("whitespace", "---\nname:   whitespace  \ndescription: \"  padded  \"\n---\n"),
        skill("nul-escape", "---\nname: nul-escape\ndescription: \"a\\x1fb\\x7fc\\x85\\u2028\\e[1m\"\n---\n"),
        Case {
            dir: "equals-license".into(),
            files: vec![("SKILL.md".into(), b"---\nname: equals-license\ndescription: x\nlicense: =\n---\n".to_vec())],
            may_crash: true,
        },
        crashing("control-char", b"---\nname: control-char\ndescription: a\x01b\n---\n"),
        crashing("invalid-utf8", b"---\nname: invalid-utf8\ndescription: caf\xe9\n---\n"),
        crashing("complex-key", b"---\nname: complex-key\ndescription: x\n? - a\n: b\n---\n"),
        crashing("double-merge", b"---\nname: double-merge\ndescription: x\nmetadata:\n  <<:\n    a: b\n  <<:\n    c: d\n---\n"),
    ];
    cases.push(Case {
        dir: "plain-file-parent".into(),
        files: vec![("plain.txt".into(), b"not a skill\n".to_vec())],
        may_crash: false,
    });
    cases
}

#[test]
fn crafted_inputs_match_reference() -> TestResult {
    let reference = agentskills()?;
    let temp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let base = temp.path().canonicalize().map_err(|e| e.to_string())?;
    let cases_dir = base.join("cases");
    let cases = crafted_cases();
    let mut invocations = Vec::new();
    for case in &cases {
        let dir = cases_dir.join(&case.dir);
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        for (name, content) in &case.files {
            std::fs::write(dir.join(name), content).map_err(|e| e.to_string())?;
        }
        let arg = format!("cases/{}", case.dir);
        for command in ["validate", "read-properties", "to-prompt"] {
            let mut invocation =
                Invocation::new(format!("{command} {arg}"), &base, &[command, &arg]);
            invocation.may_crash = case.may_crash;
            if case.dir == "control-char" || case.dir == "mapping-values" {
                invocation.direct = true;
            }
            invocations.push(invocation);
        }
    }
    #[cfg(unix)]
    std::os::unix::fs::symlink(cases_dir.join("valid"), cases_dir.join("link-to-valid"))
        .map_err(|e| e.to_string())?;
    let valid = cases_dir.join("valid");
    let plain = "cases/plain-file-parent/plain.txt";
    let mut extra = vec![
        Invocation::new(
            "validate SKILL.md path",
            &base,
            &["validate", "cases/valid/SKILL.md"],
        ),
        Invocation::new(
            "read-properties SKILL.md path",
            &base,
            &["read-properties", "cases/valid/SKILL.md"],
        ),
        Invocation::new(
            "validate lowercase skill.md path",
            &base,
            &["validate", "cases/lowercase-skill-md/skill.md"],
        ),
        Invocation::new(
            "validate trailing slash",
            &base,
            &["validate", "cases/valid/"],
        ),
        Invocation::new(
            "validate dotted path",
            &base,
            &["validate", "./cases//./valid"],
        ),
        Invocation::new(
            "validate parent path",
            &base,
            &["validate", "cases/valid/../valid"],
        ),
        Invocation::new(
            "validate absolute",
            &base,
            &["validate", &valid.to_string_lossy()],
        ),
        Invocation::new("validate .", &valid, &["validate", "."]).direct(),
        Invocation::new(
            "validate SKILL.md in cwd",
            &valid,
            &["validate", "SKILL.md"],
        ),
        Invocation::new("read-properties .", &valid, &["read-properties", "."]),
        Invocation::new("to-prompt .", &valid, &["to-prompt", "."]),
        Invocation::new("validate a file", &base, &["validate", plain]),
        Invocation::new("read-properties a file", &base, &["read-properties", plain]),
        Invocation::new("to-prompt a file", &base, &["to-prompt", plain]),
        Invocation::new("validate missing path", &base, &["validate", "cases/nope"]).direct(),
        Invocation::new(
            "read-properties missing path",
            &base,
            &["read-properties", "it's missing"],
        ),
        Invocation::new("validate no argument", &base, &["validate"]),
        Invocation::new("read-properties no argument", &base, &["read-properties"]),
        Invocation::new("to-prompt no argument", &base, &["to-prompt"]).direct(),
        Invocation::new(
            "validate extra argument",
            &base,
            &["validate", "cases/valid", "cases/tag"],
        ),
        Invocation::new(
            "validate extra arguments",
            &base,
            &["validate", "cases/valid", "x", "y"],
        ),
        Invocation::new(
            "validate missing then extra",
            &base,
            &["validate", "cases/nope", "x"],
        ),
        Invocation::new(
            "to-prompt one missing",
            &base,
            &["to-prompt", "cases/valid", "cases/nope", "cases/tag"],
        ),
        Invocation::new(
            "to-prompt several",
            &base,
            &[
                "to-prompt",
                "cases/valid",
                "cases/html-escape",
                "cases/unicode-desc",
                "cases/block-scalars",
                "cases/ansi",
                "cases/天气",
            ],
        ),
        Invocation::new(
            "to-prompt first error wins",
            &base,
            &[
                "to-prompt",
                "cases/valid",
                "cases/missing-description",
                "cases/tag",
            ],
        ),
    ];
    #[cfg(unix)]
    {
        extra.push(Invocation::new(
            "to-prompt through a symlink",
            &base,
            &["to-prompt", "cases/link-to-valid"],
        ));
        extra.push(Invocation::new(
            "validate through a symlink",
            &base,
            &["validate", "cases/link-to-valid"],
        ));
    }
    invocations.append(&mut extra);
    let (tally, outputs) = compare_all(&invocations, &reference)?;
    let rejected = outputs.iter().filter(|o| o.code != Some(0)).count();
    println!(
        "crafted: {} cases, {} invocations ({rejected} rejected by the reference)",
        cases.len(),
        invocations.len()
    );
    report("crafted inputs", &tally)
}
