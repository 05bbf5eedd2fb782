//! `quiver bench sandbox`: the per-call cost of the sandbox. The same Python tool is run as a
//! plain spawn (`python3 main.py`, stdin and stdout piped) and as a sandboxed `command` call,
//! interleaved in one run, and a `worker` round trip is timed on a warm worker.

use std::io::Write;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use miette::{IntoDiagnostic, miette};
use quiver_sandbox::worker::Worker;
use quiver_sandbox::{Access, Job, Sandbox, SandboxConfig};
use serde_json::json;

/// Arguments of `quiver bench sandbox`.
#[derive(Debug, clap::Args)]
pub struct SandboxBenchArgs {
    /// Calls of each kind.
    #[arg(long, default_value_t = 50)]
    calls: usize,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

const TOOL: &str = r#"import json, sys
request = json.load(sys.stdin)
print(json.dumps({"echo": request["arguments"]}))
"#;

const WORKER: &str = r#"import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    print(json.dumps({"id": msg["id"], "result": {"echo": msg["arguments"]}}), flush=True)
"#;

struct Figures {
    p50: f64,
    p90: f64,
    mean: f64,
}

fn figures(mut samples: Vec<Duration>) -> Figures {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let at = |q: f64| ms(samples[((samples.len() - 1) as f64 * q).round() as usize]);
    Figures {
        p50: at(0.5),
        p90: at(0.9),
        mean: samples.iter().map(|d| ms(*d)).sum::<f64>() / samples.len() as f64,
    }
}

/// Runs the benchmark.
pub fn run(args: SandboxBenchArgs) -> miette::Result<ExitCode> {
    if args.calls == 0 {
        return Err(miette!("`--calls` must be at least 1"));
    }
    quiver_sandbox::support().map_err(|why| miette!("the sandbox cannot run here: {why}"))?;
    let progress = crate::progress::Progress::spinner(format!(
        "bench sandbox: {} calls each way, then a worker",
        args.calls
    ));
    let state = tempfile::tempdir().into_diagnostic()?;
    let package = tempfile::tempdir().into_diagnostic()?;
    let tool_dir = package.path().join("tools/echo");
    std::fs::create_dir_all(&tool_dir).into_diagnostic()?;
    std::fs::write(tool_dir.join("main.py"), TOOL).into_diagnostic()?;
    std::fs::write(tool_dir.join("worker.py"), WORKER).into_diagnostic()?;
    let launcher = crate::roots::launcher()?;
    let launcher_shown = launcher
        .iter()
        .map(|word| word.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ");
    let sandbox = Sandbox::new(SandboxConfig::new(launcher, state.path().to_owned()))
        .map_err(|e| miette!("{e}"))?;
    let job = |script: &str| Job {
        package: "bench".into(),
        package_dir: package.path().to_owned(),
        command: vec!["python3".into(), script.into()],
        command_dir: tool_dir.clone(),
        access: Access::default(),
        settings: serde_json::Map::new(),
        timeout: Duration::from_secs(30),
        limits: Default::default(),
        python_env: None,
    };
    let command_job = job("main.py");
    let input = json!({"arguments": {"n": 1}, "context": {}}).to_string();
    let python = quiver_sandbox::SANDBOX_PATH
        .split(':')
        .map(|d| std::path::Path::new(d).join("python3"))
        .find(|p| p.is_file())
        .ok_or_else(|| miette!("python3 is not installed"))?;

    let (mut plain, mut sandboxed) = (Vec::new(), Vec::new());
    // One warm-up of each, then interleaved samples.
    for i in 0..=args.calls {
        let started = Instant::now();
        let mut child = Command::new(&python)
            .arg(tool_dir.join("main.py"))
            .current_dir(state.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .into_diagnostic()?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(input.as_bytes()).into_diagnostic()?;
        }
        let out = child.wait_with_output().into_diagnostic()?;
        if !out.status.success() {
            return Err(miette!(
                "the plain spawn failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let plain_time = started.elapsed();
        let started = Instant::now();
        let output = sandbox
            .run(&command_job, input.as_bytes())
            .map_err(|e| miette!("the sandboxed call failed: {e}"))?;
        if output.code != 0 {
            return Err(miette!("the sandboxed call failed: {}", output.stderr_tail));
        }
        let sandboxed_time = started.elapsed();
        if i > 0 {
            plain.push(plain_time);
            sandboxed.push(sandboxed_time);
        }
    }

    let worker = Worker::start(&sandbox, &job("worker.py")).map_err(|e| miette!("{e}"))?;
    let mut round_trips = Vec::new();
    for i in 0..=args.calls {
        let started = Instant::now();
        worker
            .call(
                "echo",
                &json!({"n": i}),
                &json!({}),
                Duration::from_secs(30),
                &|_| None,
            )
            .map_err(|e| miette!("the worker call failed: {e}"))?;
        if i > 0 {
            round_trips.push(started.elapsed());
        }
    }
    worker.stop();

    drop(progress);
    let (p, s, w) = (figures(plain), figures(sandboxed), figures(round_trips));
    let ratio = s.p50 / p.p50;
    if args.json {
        let f = |x: &Figures| json!({"p50_ms": x.p50, "p90_ms": x.p90, "mean_ms": x.mean});
        crate::out(
            &json!({
                "calls": args.calls,
                "launcher": launcher_shown,
                "plain_spawn": f(&p),
                "sandboxed_command": f(&s),
                "worker_round_trip": f(&w),
                "overhead_p50_ms": s.p50 - p.p50,
                "ratio_p50": ratio,
            })
            .to_string(),
        );
    } else {
        crate::out(&format!(
            "{} calls of each kind (python3 echo tool), launcher `{launcher_shown}`",
            args.calls
        ));
        crate::out(&format!(
            "{:<28} {:>9} {:>9} {:>9}",
            "", "p50 ms", "p90 ms", "mean ms"
        ));
        for (name, x) in [
            ("plain spawn", &p),
            ("sandboxed command", &s),
            ("worker round trip (warm)", &w),
        ] {
            crate::out(&format!(
                "{name:<28} {:>9.2} {:>9.2} {:>9.2}",
                x.p50, x.p90, x.mean
            ));
        }
        crate::out(&format!(
            "sandbox overhead per command call: {:.2} ms at p50 ({ratio:.2}x a plain spawn)",
            s.p50 - p.p50
        ));
    }
    Ok(ExitCode::SUCCESS)
}
