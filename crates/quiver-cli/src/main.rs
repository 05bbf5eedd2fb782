//! The `quiver` binary: parses arguments and hands off to `quiver_cli::run`.

fn main() -> std::process::ExitCode {
    quiver_cli::main()
}
