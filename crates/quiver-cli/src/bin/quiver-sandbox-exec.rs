//! `quiver-sandbox-exec --policy-stdin -- CMD...`: the sandbox launcher as a binary of its own,
//! installed next to `quiver`. It links only the launcher, so the kernel maps and relocates a
//! few hundred kilobytes per call instead of Quiver's whole binary (about 3 ms less per
//! sandboxed call); `quiver sandbox-exec` runs the same code where it is missing.

fn main() -> std::process::ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    quiver_cli::sandbox_exec(&args)
}
