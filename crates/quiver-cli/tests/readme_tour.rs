//! The README's tour, run as a reader of a fresh clone would run it, so the README cannot
//! drift from what the binary does.
//!
//! What is run: every ```` ```sh ```` block of the section `## A five-minute tour` of
//! `README.md`, one logical command at a time: lines ending in `\` are joined with the next,
//! blank lines and comment lines are dropped, and so is the `alias quiver=...` line (the
//! `quiver` of the commands is the binary built for this test: its folder comes first on
//! `PATH`, so `quiver` anywhere in a command, `&&` chains and `$(...)` included, is
//! `env!("CARGO_BIN_EXE_quiver")`, with `quiver-sandbox-exec` beside it).
//!
//! How: each command with `sh -c`, in order, from a fresh copy of the repository's `examples/`
//! (the only files of the repository the tour may read), stdin closed, and an environment of
//! its own: `PATH`, `HOME`, `QUIVER_HOME`, `XDG_DATA_HOME`, `XDG_CONFIG_HOME`, `XDG_STATE_HOME`,
//! `XDG_CACHE_HOME` and `TMPDIR` inside one temporary folder (so `mktemp -d` makes its scratch
//! folder there), `NO_COLOR=1`, `LANG=C.UTF-8`, and nothing else of the caller's environment
//! (`QUIVER_ALLOW_UNSANDBOXED` is passed on when set, for machines without the sandbox's kernel
//! features). After the tour the copy of `examples/` must be unchanged: the tour writes only
//! to its scratch folder and Quiver's state.
//!
//! Shell state: a line that only sets variables, `NAME=...` (one word, such as
//! `d=$(mktemp -d)`) or `export NAME=VALUE...`, runs once with `sh -c` too; the values it set
//! are passed to every later command, as one shell would keep them.
//!
//! Exit codes: each command must exit 0, unless its line ends with a comment starting
//! `# exit N` (for example `# exit 1: refused, --yes never approves a dangerous tool`): then it
//! must exit exactly N.
//!
//! A model: `quiver chat` and `quiver eval` (a command whose `quiver` subcommand is `chat` or
//! `eval`) run against the scripted fake OpenAI-compatible server of `quiver_agent::fake`,
//! following `examples/eval/fake-model.yaml`: for those commands the test sets
//! `QUIVER_BASE_URL` to the server, `QUIVER_MODEL=fake` and `QUIVER_API_KEY_ENV` to a variable
//! it sets, over what the README exports for a real provider. Every other command sees the
//! README's values unchanged.
//!
//! Every failing command is reported at once, with its output; each command's time is printed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use quiver_agent::fake::{Api, FakeServer, ScriptedModel};

mod support;

use support::repo_root;

/// The longest one command may take before it is killed and reported.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(120);

/// One logical command of the tour.
#[derive(Debug, Clone, PartialEq)]
struct TourCommand {
    /// The README line it starts on (1-based).
    line: usize,
    /// The command, continuation lines joined.
    text: String,
    /// The exit code it must have.
    expect: i32,
    /// The variables it sets, when it is a line that only sets variables.
    sets: Vec<String>,
}

/// The commands of the section `## A five-minute tour` of `readme`, in order.
fn tour_commands(readme: &str) -> Vec<TourCommand> {
    let lines: Vec<&str> = readme.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.trim_end() == "## A five-minute tour")
        .expect("README.md has no `## A five-minute tour` section");
    let end = lines[start + 1..]
        .iter()
        .position(|l| l.starts_with("## "))
        .map_or(lines.len(), |i| start + 1 + i);
    let mut commands = Vec::new();
    let mut in_block = false;
    let mut pending: Option<(usize, String)> = None;
    for (i, raw) in lines.iter().enumerate().take(end).skip(start + 1) {
        let trimmed = raw.trim();
        if !in_block {
            in_block = trimmed == "```sh";
            continue;
        }
        if trimmed == "```" {
            assert!(
                pending.is_none(),
                "README.md:{}: a `\\` ends a block",
                i + 1
            );
            in_block = false;
            continue;
        }
        let (first, mut text) = match pending.take() {
            Some((first, so_far)) => (first, format!("{so_far} {trimmed}")),
            None => {
                if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with("alias ") {
                    continue;
                }
                (i + 1, trimmed.to_owned())
            }
        };
        if let Some(head) = text.strip_suffix('\\') {
            text = head.trim_end().to_owned();
            pending = Some((first, text));
            continue;
        }
        commands.push(command(first, text));
    }
    commands
}

/// A command with its expected exit code and the variables it sets.
fn command(line: usize, text: String) -> TourCommand {
    let (code, comment) = split_comment(&text);
    let expect = comment
        .and_then(|c| c.strip_prefix("exit "))
        .map(|rest| {
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            digits
                .parse()
                .unwrap_or_else(|_| panic!("README.md:{line}: `# exit` needs a number"))
        })
        .unwrap_or(0);
    TourCommand {
        line,
        sets: assigned_names(code),
        text,
        expect,
    }
}

/// The command and its trailing comment (the text after the first `#` that starts a word
/// outside quotes), trimmed.
fn split_comment(text: &str) -> (&str, Option<&str>) {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut previous = ' ';
    for (i, c) in text.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' && quote != Some('\'') {
            escaped = true;
        } else if let Some(q) = quote {
            if c == q {
                quote = None;
            }
        } else if c == '\'' || c == '"' {
            quote = Some(c);
        } else if c == '#' && previous.is_whitespace() {
            return (text[..i].trim(), Some(text[i + 1..].trim()));
        }
        previous = c;
    }
    (text.trim(), None)
}

/// The variables a line that only sets variables sets: `export A=1 B=2`, or one word
/// `NAME=...` (`d=$(mktemp -d)`). Empty for any other command.
fn assigned_names(code: &str) -> Vec<String> {
    let name_of = |word: &str| {
        let (name, _) = word.split_once('=')?;
        let mut chars = name.chars();
        let first = chars.next()?;
        ((first.is_ascii_alphabetic() || first == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .then(|| name.to_owned())
    };
    if let Some(rest) = code.strip_prefix("export ") {
        let names: Vec<String> = rest.split_whitespace().filter_map(name_of).collect();
        assert_eq!(
            names.len(),
            rest.split_whitespace().count(),
            "`{code}`: write `export NAME=VALUE...` with values without spaces"
        );
        return names;
    }
    let Some(name) = name_of(code) else {
        return Vec::new();
    };
    // One word: nothing but the assignment (a `$(...)` may hold spaces).
    let value = &code[name.len() + 1..];
    let one_word =
        !value.contains(char::is_whitespace) || (value.starts_with("$(") && value.ends_with(')'));
    if one_word { vec![name] } else { Vec::new() }
}

/// Whether the command runs `quiver chat` or `quiver eval` (the subcommand after the global
/// `--root PATH` options).
fn needs_model(code: &str) -> bool {
    let words: Vec<&str> = code.split_whitespace().collect();
    words.iter().enumerate().any(|(i, w)| {
        if *w != "quiver" {
            return false;
        }
        let mut j = i + 1;
        while words.get(j) == Some(&"--root") {
            j += 2;
        }
        matches!(words.get(j), Some(&"chat" | &"eval"))
    })
}

/// Copies the folder `from` to `to`.
fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Every file under `dir` with its bytes (paths relative to `dir`).
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        let mut entries: Vec<_> = fs::read_dir(dir).unwrap().map(Result::unwrap).collect();
        entries.sort_by_key(fs::DirEntry::file_name);
        for entry in entries {
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                walk(root, &path, out);
            } else {
                let rel = path.strip_prefix(root).unwrap().to_owned();
                out.insert(rel, fs::read(&path).unwrap_or_default());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// What one command did.
struct Ran {
    status: Option<ExitStatus>,
    stdout: String,
    stderr: String,
    took: Duration,
}

/// Runs `script` with `sh -c` in `cwd` with exactly `env`, killing its process group after
/// [`COMMAND_TIMEOUT`].
fn run_sh(script: &str, cwd: &Path, env: &BTreeMap<String, String>, scratch: &Path) -> Ran {
    let out = scratch.join("stdout");
    let err = scratch.join("stderr");
    let started = Instant::now();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(cwd)
        .env_clear()
        .envs(env)
        .stdin(Stdio::null())
        .stdout(fs::File::create(&out).unwrap())
        .stderr(fs::File::create(&err).unwrap())
        .process_group(0)
        .spawn()
        .unwrap();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > COMMAND_TIMEOUT {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .status();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Ran {
        status,
        stdout: String::from_utf8_lossy(&fs::read(&out).unwrap()).into_owned(),
        stderr: String::from_utf8_lossy(&fs::read(&err).unwrap()).into_owned(),
        took: started.elapsed(),
    }
}

/// The last `n` lines of `text`.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[test]
fn the_tour_parses_as_documented() {
    let readme = "# x\n\n## A five-minute tour\n\n```sh\nalias quiver=\"cargo run --\"\n\n# a comment\n\
        d=$(mktemp -d)\nexport A=1 B=two\nquiver --root \"$d\" list   # the catalog\n\
        quiver call x --args '{\"q\": \"a # b\"}' \\\n    --yes     # exit 1: refused\n\
        quiver --root a --root b chat -m hi\n```\n\n```text\nnot run\n```\n\n## Next\n\n```sh\nquiver other\n```\n";
    let commands = tour_commands(readme);
    let texts: Vec<(&str, i32, Vec<String>)> = commands
        .iter()
        .map(|c| (c.text.as_str(), c.expect, c.sets.clone()))
        .collect();
    assert_eq!(
        texts,
        vec![
            ("d=$(mktemp -d)", 0, vec!["d".to_owned()]),
            ("export A=1 B=two", 0, vec!["A".to_owned(), "B".to_owned()]),
            ("quiver --root \"$d\" list   # the catalog", 0, vec![]),
            (
                "quiver call x --args '{\"q\": \"a # b\"}' --yes     # exit 1: refused",
                1,
                vec![]
            ),
            ("quiver --root a --root b chat -m hi", 0, vec![]),
        ]
    );
    assert_eq!(commands[3].line, 12);
    assert!(needs_model(&commands[4].text));
    assert!(!needs_model(&commands[2].text));
    assert!(assigned_names("FOO=1 quiver list").is_empty());
}

#[test]
fn every_command_of_the_readme_tour_runs_on_a_fresh_clone() {
    let readme = fs::read_to_string(repo_root().join("README.md")).unwrap();
    let commands = tour_commands(&readme);
    assert!(
        commands.len() >= 10,
        "the tour has only {} commands",
        commands.len()
    );

    let dir = tempfile::tempdir().unwrap();
    let clone = dir.path().join("clone");
    copy_tree(&repo_root().join("examples"), &clone.join("examples"));
    let before = snapshot(&clone);
    let home = dir.path().join("home");
    let tmp = dir.path().join("tmp");
    let scratch = dir.path().join("output");
    for d in [&home, &tmp, &scratch] {
        fs::create_dir_all(d).unwrap();
    }

    let model_text = fs::read_to_string(clone.join("examples/eval/fake-model.yaml")).unwrap();
    let model = ScriptedModel::parse(&model_text).unwrap();
    let server = FakeServer::with_responder(Api::OpenAi, model.responder()).unwrap();

    let bin = Path::new(env!("CARGO_BIN_EXE_quiver")).parent().unwrap();
    let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into());
    let mut base: BTreeMap<String, String> = BTreeMap::new();
    let mut set = |k: &str, v: &Path| base.insert(k.to_owned(), v.display().to_string());
    set("HOME", &home);
    set("QUIVER_HOME", &home.join(".local/share/quiver"));
    set("XDG_DATA_HOME", &home.join(".local/share"));
    set("XDG_CONFIG_HOME", &home.join(".config"));
    set("XDG_STATE_HOME", &home.join(".local/state"));
    set("XDG_CACHE_HOME", &home.join(".cache"));
    set("TMPDIR", &tmp);
    base.insert("PATH".into(), format!("{}:{path}", bin.display()));
    base.insert("NO_COLOR".into(), "1".into());
    base.insert("LANG".into(), "C.UTF-8".into());
    base.insert("USER".into(), "tour".into());
    if let Ok(v) = std::env::var("QUIVER_ALLOW_UNSANDBOXED") {
        base.insert("QUIVER_ALLOW_UNSANDBOXED".into(), v);
    }
    let model_env = [
        ("QUIVER_BASE_URL", server.url().to_owned()),
        ("QUIVER_MODEL", "fake".to_owned()),
        ("QUIVER_API_KEY_ENV", "QUIVER_TOUR_KEY".to_owned()),
        ("QUIVER_TOUR_KEY", "tour-key".to_owned()),
    ];

    let started = Instant::now();
    let mut kept: BTreeMap<String, String> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut model_commands = 0;
    for c in &commands {
        let mut env = base.clone();
        env.extend(kept.clone());
        if needs_model(&c.text) {
            model_commands += 1;
            env.extend(model_env.iter().map(|(k, v)| ((*k).to_owned(), v.clone())));
        }
        let script = if c.sets.is_empty() {
            c.text.clone()
        } else {
            let values: Vec<String> = c.sets.iter().map(|n| format!("\"${n}\"")).collect();
            format!(
                "{}\nrc=$?\nprintf '%s\\0' {}\nexit $rc",
                c.text,
                values.join(" ")
            )
        };
        let ran = run_sh(&script, &clone, &env, &scratch);
        eprintln!(
            "{:>6.2} s  README.md:{}  {}",
            ran.took.as_secs_f64(),
            c.line,
            c.text
        );
        let code = ran.status.and_then(|s| s.code());
        if code != Some(c.expect) {
            failures.push(format!(
                "README.md:{}: `{}`\n  expected exit {}, got {}\n  stdout:\n{}\n  stderr:\n{}",
                c.line,
                c.text,
                c.expect,
                match (ran.status, code) {
                    (None, _) => format!("nothing: killed after {COMMAND_TIMEOUT:?}"),
                    (Some(_), Some(code)) => code.to_string(),
                    (Some(s), None) => format!("a signal ({s})"),
                },
                tail(&ran.stdout, 20),
                tail(&ran.stderr, 20)
            ));
        }
        if !c.sets.is_empty() {
            let values: Vec<&str> = ran.stdout.split('\0').collect();
            for (name, value) in c.sets.iter().zip(values) {
                kept.insert(name.clone(), value.to_owned());
            }
        }
    }
    eprintln!(
        "the tour: {} commands in {:.1} s",
        commands.len(),
        started.elapsed().as_secs_f64()
    );

    let after = snapshot(&clone);
    let changed: Vec<&PathBuf> = after
        .iter()
        .filter(|(path, bytes)| before.get(*path) != Some(*bytes))
        .map(|(path, _)| path)
        .chain(before.keys().filter(|p| !after.contains_key(*p)))
        .collect();
    if !changed.is_empty() {
        failures.push(format!(
            "the tour wrote into the repository's files: {changed:?}"
        ));
    }
    if model_commands == 0 || server.requests().is_empty() {
        failures.push("the tour's chat and eval never reached the fake model server".to_owned());
    }
    assert!(
        failures.is_empty(),
        "the README's tour ({} commands) did not go as the README says:\n\n{}",
        commands.len(),
        failures.join("\n\n")
    );
}
