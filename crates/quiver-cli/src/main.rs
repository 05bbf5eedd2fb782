//! The `quiver` binary: parses arguments and hands off to `quiver_cli::run`.

fn main() -> std::process::ExitCode {
    // The sandbox launcher must start before any thread: dispatch it before anything else.
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if args.first().is_some_and(|a| a == quiver_cli::SANDBOX_EXEC) {
        return quiver_cli::sandbox_exec(&args[1..]);
    }
    quiver_cli::main()
}
