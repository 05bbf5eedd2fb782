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
        let framed = FramedRef {
            build: crate::BUILD,
            policy: self,
        };
        let json = serde_json::to_vec(&framed).unwrap_or_default();
        let mut frame = (json.len() as u64).to_le_bytes().to_vec();
        frame.extend(json);
        frame
    }

    /// Reads one [`Policy::frame`] from `input`, and not a byte more; a frame written by
    /// another build of the sandbox is refused.
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
        #[derive(Deserialize)]
        struct Build {
            build: String,
        }
        let invalid = |e| io::Error::new(io::ErrorKind::InvalidData, e);
        let Build { build } = serde_json::from_slice(&json).map_err(invalid)?;
        if build != crate::BUILD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "it comes from sandbox build {build} and this launcher is build {}; rebuild both binaries together",
                    crate::BUILD
                ),
            ));
        }
        let framed: Framed = serde_json::from_slice(&json).map_err(invalid)?;
        Ok(framed.policy)
    }
}

/// A policy frame's policy (its `build` was checked before).
#[derive(Deserialize)]
struct Framed {
    policy: Policy,
}

/// A policy frame's JSON as the runtime writes it: the build that wrote it
/// ([`crate::BUILD`]) and the policy.
#[derive(Serialize)]
struct FramedRef<'a> {
    build: &'a str,
    policy: &'a Policy,
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

/// Limits a tool asks for instead of the defaults (its `tool.yaml`'s `limits:`); `None`
/// keeps the default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct LimitRequest {
    /// [`Limits::memory`].
    pub memory: Option<u64>,
    /// [`Limits::tasks`].
    pub tasks: Option<u64>,
    /// [`Limits::cpu_millicores`].
    pub cpu_millicores: Option<u64>,
    /// [`Limits::cpu_seconds`].
    pub cpu_seconds: Option<u64>,
    /// [`Limits::tmp_bytes`].
    pub tmp_bytes: Option<u64>,
    /// [`Limits::data_bytes`].
    pub data_bytes: Option<u64>,
}

impl Limits {
    /// The limits a tool gets: these defaults with what it asks for, each value at most the
    /// operator's `ceiling` (a value over it is granted as the ceiling, and named in the
    /// returned warnings). A memory or task limit above the per-process rlimits raises them
    /// with it (the cgroup then bounds the whole call).
    pub fn grant(&self, request: &LimitRequest, ceiling: &Limits) -> (Limits, Vec<String>) {
        let mut limits = *self;
        let mut warnings = Vec::new();
        let fields: [(&str, Option<u64>, u64, &mut u64, bool); 6] = [
            (
                "memory",
                request.memory,
                ceiling.memory,
                &mut limits.memory,
                true,
            ),
            (
                "processes",
                request.tasks,
                ceiling.tasks,
                &mut limits.tasks,
                false,
            ),
            (
                "cpu",
                request.cpu_millicores,
                ceiling.cpu_millicores,
                &mut limits.cpu_millicores,
                false,
            ),
            (
                "cpu_seconds",
                request.cpu_seconds,
                ceiling.cpu_seconds,
                &mut limits.cpu_seconds,
                false,
            ),
            (
                "tmp",
                request.tmp_bytes,
                ceiling.tmp_bytes,
                &mut limits.tmp_bytes,
                true,
            ),
            (
                "disk",
                request.data_bytes,
                ceiling.data_bytes,
                &mut limits.data_bytes,
                true,
            ),
        ];
        for (name, asked, most, granted, bytes) in fields {
            let Some(asked) = asked else { continue };
            // A ceiling below the default (an operator's choice) also bounds the default.
            let most = most.max(1);
            *granted = if asked > most {
                warnings.push(format!(
                    "`limits.{name}` of {} is over the operator's ceiling of {}; the tool gets {}",
                    amount(name, asked, bytes),
                    amount(name, most, bytes),
                    amount(name, most, bytes)
                ));
                most
            } else {
                asked
            };
        }
        limits.address_space = limits.address_space.max(limits.memory.saturating_mul(2));
        limits.processes = limits.processes.max(limits.tasks);
        (limits, warnings)
    }
}

impl Limits {
    /// The operator's `ceiling` over these defaults: returns the defaults (each lowered to the
    /// ceiling where the operator set it below them) and the ceiling (these defaults where the
    /// operator set nothing, so a tool may only lower those).
    pub fn with_ceiling(&self, ceiling: &LimitRequest) -> (Limits, Limits) {
        let mut most = *self;
        let mut defaults = *self;
        let fields = [
            (ceiling.memory, &mut most.memory, &mut defaults.memory),
            (ceiling.tasks, &mut most.tasks, &mut defaults.tasks),
            (
                ceiling.cpu_millicores,
                &mut most.cpu_millicores,
                &mut defaults.cpu_millicores,
            ),
            (
                ceiling.cpu_seconds,
                &mut most.cpu_seconds,
                &mut defaults.cpu_seconds,
            ),
            (
                ceiling.tmp_bytes,
                &mut most.tmp_bytes,
                &mut defaults.tmp_bytes,
            ),
            (
                ceiling.data_bytes,
                &mut most.data_bytes,
                &mut defaults.data_bytes,
            ),
        ];
        for (set, most, default) in fields {
            if let Some(value) = set {
                *most = value;
                *default = (*default).min(value);
            }
        }
        (defaults, most)
    }
}

/// A limit's value in words: `64 MiB`, `0.5 cores`, `32`.
fn amount(name: &str, value: u64, bytes: bool) -> String {
    if bytes {
        format!("{} MiB", value >> 20)
    } else if name == "cpu" {
        format!("{} cores", value as f64 / 1000.0)
    } else {
        value.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_gets_what_it_asks_for_within_the_ceiling() {
        let defaults = Limits::default();
        let ceiling = Limits {
            memory: 2 << 30,
            cpu_millicores: 2000,
            ..Limits::default()
        };
        let ask = |f: fn(&mut LimitRequest)| {
            let mut request = LimitRequest::default();
            f(&mut request);
            defaults.grant(&request, &ceiling)
        };
        let operator = LimitRequest {
            memory: Some(2 << 30),
            tmp_bytes: Some(16 << 20),
            ..LimitRequest::default()
        };
        let (lowered, most) = defaults.with_ceiling(&operator);
        assert_eq!((lowered.memory, lowered.tmp_bytes), (1 << 30, 16 << 20));
        assert_eq!(
            (most.memory, most.tmp_bytes, most.tasks),
            (2 << 30, 16 << 20, 128)
        );
        let (same, none) = ask(|_| {});
        assert_eq!((same, none.len()), (defaults, 0));
        let (low, none) = ask(|r| r.memory = Some(32 << 20));
        assert_eq!(
            (low.memory, low.address_space, none.len()),
            (32 << 20, 2 << 30, 0)
        );
        let (high, none) = ask(|r| r.memory = Some(1536 << 20));
        assert_eq!(
            (high.memory, high.address_space, none.len()),
            (1536 << 20, 3 << 30, 0)
        );
        let (capped, warnings) = ask(|r| {
            r.memory = Some(8 << 30);
            r.cpu_millicores = Some(4000);
            r.tasks = Some(64);
            r.data_bytes = Some(1 << 30);
        });
        assert_eq!(
            (
                capped.memory,
                capped.cpu_millicores,
                capped.tasks,
                capped.data_bytes
            ),
            (2 << 30, 2000, 64, 256 << 20)
        );
        assert_eq!(
            warnings,
            [
                "`limits.memory` of 8192 MiB is over the operator's ceiling of 2048 MiB; the tool gets 2048 MiB",
                "`limits.cpu` of 4 cores is over the operator's ceiling of 2 cores; the tool gets 2 cores",
                "`limits.disk` of 1024 MiB is over the operator's ceiling of 256 MiB; the tool gets 256 MiB",
            ]
        );
    }

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
        // A frame from another build of the sandbox is refused, naming both builds.
        let json = serde_json::to_vec(&FramedRef {
            build: "0.0.0-stale",
            policy: &policy,
        })
        .unwrap();
        let mut stale = (json.len() as u64).to_le_bytes().to_vec();
        stale.extend(json);
        let err = Policy::read_frame(&mut io::Cursor::new(stale)).unwrap_err();
        assert!(err.to_string().contains("0.0.0-stale"), "{err}");
        assert!(err.to_string().contains(crate::BUILD), "{err}");
    }
}
