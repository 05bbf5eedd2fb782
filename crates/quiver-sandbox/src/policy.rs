//! The policy the launcher enforces: a JSON file written by the runtime, read by
//! `quiver sandbox-exec --policy FILE -- CMD...` before it starts the tool.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Everything the launcher needs to confine one tool process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// The complete environment of the tool (nothing else is inherited).
    pub env: BTreeMap<String, String>,
    /// The working directory (the package's data folder).
    pub cwd: PathBuf,
    /// Paths readable and executable (the interpreter, the dynamic loader, the entry point;
    /// the system folders too when the tool may start other programs).
    pub read_exec: Vec<PathBuf>,
    /// Paths readable only.
    pub read: Vec<PathBuf>,
    /// Paths readable and writable (the data folder, declared writes, `/dev/null`).
    pub read_write: Vec<PathBuf>,
    /// How the tool reaches the network.
    pub network: Network,
    /// Resource limits.
    pub limits: Limits,
    /// The user and group the tool runs as when the launcher runs as root; `None` keeps the
    /// launcher's identity.
    pub run_as: Option<(u32, u32)>,
}

/// Network access of a sandboxed tool. It always runs in its own network namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Network {
    /// No network at all: an empty namespace, and IP sockets refused by seccomp.
    None,
    /// Only through the runtime's proxy: the launcher relays `127.0.0.1:<port>` inside the
    /// namespace to this Unix socket, and sets `HTTP_PROXY`/`HTTPS_PROXY` for the tool.
    Proxy {
        /// The proxy's Unix socket.
        socket: PathBuf,
    },
}

/// Resource limits (soft and hard) set with `setrlimit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Address space in bytes (`RLIMIT_AS`).
    pub address_space: u64,
    /// Processes of the tool's user (`RLIMIT_NPROC`).
    pub processes: u64,
    /// Largest file written, in bytes (`RLIMIT_FSIZE`).
    pub file_size: u64,
    /// Open file descriptors (`RLIMIT_NOFILE`).
    pub open_files: u64,
    /// CPU seconds (`RLIMIT_CPU`).
    pub cpu_seconds: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            address_space: 2 << 30,
            processes: 256,
            file_size: 64 << 20,
            open_files: 256,
            cpu_seconds: 60,
        }
    }
}
