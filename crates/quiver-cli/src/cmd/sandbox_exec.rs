//! `quiver sandbox-exec --policy-stdin -- CMD...`: the sandbox launcher. The runtime starts it
//! for every package tool; it is dispatched from `main` before clap, tokio or any thread
//! starts, and hands off to [`quiver_sandbox::launcher::main`].

use std::ffi::OsString;
use std::process::ExitCode;

/// The subcommand's name, as `main` recognises it.
pub const NAME: &str = "sandbox-exec";

/// Runs the launcher with the arguments after `sandbox-exec`.
pub fn run(args: &[OsString]) -> ExitCode {
    let code = quiver_sandbox::launcher::main(args);
    ExitCode::from(u8::try_from(code).unwrap_or(quiver_sandbox::launcher::SETUP_FAILED as u8))
}

/// The sandbox configuration: this binary as its launcher and data folders under the state
/// folder. `allow_unsandboxed: true` in the config file's `runtime:` section (or,
/// equivalently, `QUIVER_ALLOW_UNSANDBOXED=1`) lets an operator run package tools without
/// isolation where the machine cannot enforce it.
fn sandbox_config() -> miette::Result<quiver_sandbox::SandboxConfig> {
    let exe = std::env::current_exe().map_err(|e| {
        miette::miette!("cannot find Quiver's own binary to launch the sandbox: {e}")
    })?;
    let state = crate::roots::state_dir().ok_or_else(|| {
        miette::miette!(
            help = "set QUIVER_HOME to the folder Quiver keeps its state in",
            "no state folder: none of QUIVER_HOME, XDG_DATA_HOME and HOME is set"
        )
    })?;
    let mut config =
        quiver_sandbox::SandboxConfig::new(vec![exe.into_os_string(), NAME.into()], state);
    config.hidden.extend(crate::roots::config_path());
    config.allow_unsandboxed = crate::roots::runtime_config()?.allow_unsandboxed
        || std::env::var("QUIVER_ALLOW_UNSANDBOXED").is_ok_and(|v| v == "1");
    Ok(config)
}

/// The executor for package tools: Quiver's sandbox, and the config file's external MCP
/// servers (`mcp_servers:`).
pub fn executor() -> miette::Result<quiver_runtime::sandboxed::SandboxExecutor> {
    executor_with(crate::roots::mcp_servers()?)
}

/// [`executor`] with the external MCP servers already read from the config file.
pub fn executor_with(
    servers: quiver_runtime::mcp_servers::McpServers,
) -> miette::Result<quiver_runtime::sandboxed::SandboxExecutor> {
    Ok(
        quiver_runtime::sandboxed::SandboxExecutor::new(sandbox_config()?)
            .map_err(|e| miette::miette!("cannot set up the sandbox: {e}"))?
            .with_mcp_servers(std::sync::Arc::new(servers)),
    )
}
