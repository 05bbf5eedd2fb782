//! The policy the launcher enforces: JSON the runtime writes into the launcher's stdin (one
//! frame before the tool's own input, never a file: it holds the package's secret settings),
//! read by `quiver sandbox-exec --policy-stdin -- CMD...` before it starts the tool.

use std::collections::BTreeMap;
use std::io::{self, Read};
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
    /// Paths that never exist in the tool's mount view, even inside a granted folder (Quiver's
    /// state folder, the config file); only the data folder and package folder of the tool's
    /// own package, listed above, are mounted back inside them.
    pub hidden: Vec<PathBuf>,
    /// The data folder, whose disk use the launcher keeps within [`Limits::data_bytes`].
    pub data_dir: PathBuf,
    /// How the tool reaches the network.
    pub network: Network,
    /// Resource limits.
    pub limits: Limits,
    /// The user and group the tool runs as when the launcher runs as root; `None` keeps the
    /// launcher's identity.
    pub run_as: Option<(u32, u32)>,
}

/// The largest policy frame the launcher reads.
const MAX_FRAME: u64 = 16 << 20;

impl Policy {
    /// The policy as the launcher reads it from stdin: its length (8 bytes, little-endian),
    /// then its JSON.
    pub fn frame(&self) -> Vec<u8> {
        let json = serde_json::to_vec(self).unwrap_or_default();
        let mut frame = (json.len() as u64).to_le_bytes().to_vec();
        frame.extend(json);
        frame
    }

    /// Reads one [`Policy::frame`] from `input`, and not a byte more.
    pub fn read_frame(input: &mut impl Read) -> io::Result<Policy> {
        let mut len = [0u8; 8];
        input.read_exact(&mut len)?;
        let len = u64::from_le_bytes(len);
        if len > MAX_FRAME {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a policy of {len} bytes is larger than {MAX_FRAME}"),
            ));
        }
        let mut json = vec![0u8; len as usize];
        input.read_exact(&mut json)?;
        serde_json::from_slice(&json).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }
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

/// Resource limits: per process with `setrlimit` (soft and hard), for the whole call or
/// worker with cgroups (memory, processes, CPU), the size of its private `/tmp`, and the disk
/// budget of its data folder.
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
    /// Memory of all the call's processes together, in bytes (cgroup `memory`).
    pub memory: u64,
    /// Processes and threads of the call together (cgroup `pids`).
    pub tasks: u64,
    /// CPU share of the call, in thousandths of one core (cgroup `cpu`; 1000 = one core).
    pub cpu_millicores: u64,
    /// Size of the private `/tmp` (a tmpfs), in bytes.
    pub tmp_bytes: u64,
    /// Disk budget of the package's data folder, in bytes: a call that starts over it is
    /// refused, and one that writes past it is stopped.
    pub data_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            address_space: 2 << 30,
            processes: 256,
            file_size: 64 << 20,
            open_files: 256,
            cpu_seconds: 60,
            memory: 1 << 30,
            tasks: 128,
            cpu_millicores: 1000,
            tmp_bytes: 64 << 20,
            data_bytes: 256 << 20,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_reads_back_and_leaves_what_follows() {
        let policy = Policy {
            env: BTreeMap::from([("QUIVER_SETTING_KEY".into(), "s3cret".into())]),
            cwd: "/d".into(),
            read_exec: vec!["/usr/bin/python3".into()],
            read: vec![],
            read_write: vec!["/d".into()],
            hidden: vec!["/state".into()],
            data_dir: "/d".into(),
            network: Network::None,
            limits: Limits::default(),
            run_as: Some((1, 1)),
        };
        let mut input = policy.frame();
        input.extend(b"tool input");
        let mut reader = io::Cursor::new(input);
        assert_eq!(Policy::read_frame(&mut reader).unwrap(), policy);
        let mut rest = String::new();
        reader.read_to_string(&mut rest).unwrap();
        assert_eq!(rest, "tool input");
        let cases: [&[u8]; 3] = [b"", b"\x05\0\0\0\0\0\0\0{}", &[0xff; 8]];
        for case in cases {
            assert!(
                Policy::read_frame(&mut io::Cursor::new(case)).is_err(),
                "{case:?}"
            );
        }
    }
}
