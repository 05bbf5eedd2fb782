#![allow(clippy::print_stdout, clippy::print_stderr)]

//! Serves a scripted stand-in for a model on 127.0.0.1, speaking the OpenAI-compatible API
//! (or Anthropic's with `--anthropic`), until interrupted; point `quiver chat` or
//! `quiver eval` at it to try them without a real model:
//!
//! ```sh
//! cargo run -p quiver-agent --features fake-server --example fake_model -- examples/eval/fake-model.yaml
//! QUIVER_BASE_URL=http://127.0.0.1:PORT/v1 QUIVER_MODEL=fake \
//!     quiver --root examples/packages eval examples/eval/basic.yaml --baseline eager
//! ```

use std::process::ExitCode;

use quiver_agent::fake::{Api, FakeServer, ScriptedModel};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let api = if args.iter().any(|a| a == "--anthropic") {
        Api::Anthropic
    } else {
        Api::OpenAi
    };
    let Some(path) = args.iter().find(|a| !a.starts_with("--")) else {
        eprintln!("usage: fake_model MODEL.yaml [--anthropic]");
        return ExitCode::from(2);
    };
    let model = match std::fs::read_to_string(path)
        .map_err(|e| e.to_string())
        .and_then(|t| ScriptedModel::parse(&t))
    {
        Ok(model) => model,
        Err(e) => {
            eprintln!("{path}: {e}");
            return ExitCode::from(2);
        }
    };
    let server = match FakeServer::with_responder(api, model.responder()) {
        Ok(server) => server,
        Err(e) => {
            eprintln!("cannot listen: {e}");
            return ExitCode::from(2);
        }
    };
    println!("QUIVER_BASE_URL={}", server.url());
    loop {
        std::thread::park();
    }
}
