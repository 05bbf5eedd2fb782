//! Item 5: progress bars on long work, drawn at a terminal only.

use quiver_agent::fake::{Api, FakeServer, ScriptedModel};

use crate::{Quiver, both};

/// Runs `quiver args` at a pseudo-terminal (util-linux `script`) and returns what the terminal
/// received (stdout and stderr together); `None` without `script`.
fn at_terminal(q: &Quiver, args: &[String]) -> Option<String> {
    let quiver = env!("CARGO_BIN_EXE_quiver");
    let words: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    let command = format!("'{quiver}' {}", words.join(" "));
    let mut script = std::process::Command::new("script");
    script.args(["-qec", &command, "/dev/null"]);
    for (key, value) in q.command(&[]).get_envs() {
        match value {
            Some(value) => script.env(key, value),
            None => script.env_remove(key),
        };
    }
    let out = script
        .current_dir(q.path("cwd"))
        .stdin(std::process::Stdio::null())
        .output()
        .ok()?;
    assert_eq!(out.status.code(), Some(0), "{}", both(&out));
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn args(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| (*w).to_owned()).collect()
}

/// `bench load` shows a spinner at a terminal, none with `-q`, and none when stderr is a pipe;
/// its figures come out the same.
#[test]
fn a_benchmark_spins_at_a_terminal_only() {
    let q = Quiver::new();
    let bench = ["bench", "load", "--packages", "300"];
    let Some(seen) = at_terminal(&q, &args(&bench)) else {
        eprintln!("SKIPPED: no `script` to give quiver a terminal");
        return;
    };
    assert!(
        seen.contains("bench load: generating and loading 300 packages"),
        "{seen}"
    );
    assert!(seen.contains("packages    300"), "{seen}");
    let mut quiet = args(&["-q"]);
    quiet.extend(args(&bench));
    let seen = at_terminal(&q, &quiet).unwrap();
    assert!(!seen.contains("bench load:"), "{seen}");
    let out = q.run(&bench, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", both(&out));
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("bench load:"),
        "{}",
        both(&out)
    );
}

/// `eval` counts its cases on a bar at a terminal; piped, it prints only its figures.
#[test]
fn eval_counts_its_cases_at_a_terminal() {
    let model = ScriptedModel::parse(crate::silent::MODEL).unwrap();
    let server = FakeServer::with_responder(Api::OpenAi, model.responder()).unwrap();
    let q = Quiver::new();
    let eval = crate::silent::eval_env(&q, server.url());
    let Some(seen) = at_terminal(&q, &eval) else {
        eprintln!("SKIPPED: no `script` to give quiver a terminal");
        return;
    };
    assert!(seen.contains("eval progressive"), "{seen}");
    assert!(seen.contains("call accuracy"), "{seen}");
    let words: Vec<&str> = eval.iter().map(String::as_str).collect();
    let out = q.run(&words, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", both(&out));
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("eval progressive"),
        "{}",
        both(&out)
    );
}
