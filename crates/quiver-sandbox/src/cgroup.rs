//! Aggregate limits of one call or worker (the tool's first process and every process it
//! starts): memory, processes and CPU through cgroups.
//!
//! Each controller is used where this machine has it: cgroup v2 where it is delegated to the
//! runtime's own group (the controller listed in that group's `cgroup.subtree_control`),
//! else a v1 hierarchy (`/sys/fs/cgroup/memory`, `pids`, `cpu`). The runtime prepares a
//! `quiver` group under its own group (so the tools stay inside any limit the runtime itself
//! has) when the sandbox starts, and removes what a killed launcher left; each launcher makes
//! `quiver/<its pid>` with the call's limits, its tool's first process moves itself into it
//! before it builds its mount view (see [`Cgroup::join`]), and it is removed when the tool
//! ends. A controller this machine lacks is named in a warning when the
//! sandbox starts ([`prepare`]); the call then runs without that limit.

use std::path::{Path, PathBuf};

use crate::policy::Limits;

/// A cgroup controller the sandbox uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Controller {
    Memory,
    Pids,
    Cpu,
}

const CONTROLLERS: [Controller; 3] = [Controller::Memory, Controller::Pids, Controller::Cpu];

impl Controller {
    fn name(self) -> &'static str {
        match self {
            Controller::Memory => "memory",
            Controller::Pids => "pids",
            Controller::Cpu => "cpu",
        }
    }

    /// The limit it enforces, for a warning.
    fn limit(self) -> &'static str {
        match self {
            Controller::Memory => "the memory limit of a call",
            Controller::Pids => "the process limit of a call",
            Controller::Cpu => "the CPU limit of a call",
        }
    }
}

/// Where a controller lives: a v1 hierarchy, or the v2 one.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Place {
    V1(PathBuf),
    V2(PathBuf),
}

impl Place {
    fn dir(&self) -> &Path {
        match self {
            Place::V1(dir) | Place::V2(dir) => dir,
        }
    }
}

/// Where cgroup hierarchies are mounted.
const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// The machine's cgroup file systems as this process sees them: the text of
/// `/proc/self/cgroup` and the mount root (tests pass a fake one).
struct Mounts {
    own: String,
    root: PathBuf,
}

impl Mounts {
    fn real() -> Mounts {
        Mounts {
            own: std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default(),
            root: PathBuf::from(CGROUP_ROOT),
        }
    }

    /// The v2 hierarchy's mount point, if there is one (`/sys/fs/cgroup` itself on a
    /// v2-only machine, `/sys/fs/cgroup/unified` on a hybrid one).
    fn v2_root(&self) -> Option<PathBuf> {
        [self.root.clone(), self.root.join("unified")]
            .into_iter()
            .find(|p| p.join("cgroup.controllers").is_file())
    }

    /// This process's own group for `controller`: its v1 hierarchy's, else the v2 one.
    fn own_group(&self, controller: Controller) -> Option<Place> {
        let relative = |path: &str| PathBuf::from(path.trim_start_matches('/'));
        for line in self.own.lines() {
            let mut parts = line.splitn(3, ':');
            let (_, list, path) = (parts.next()?, parts.next()?, parts.next()?);
            if !list.is_empty() && list.split(',').any(|c| c == controller.name()) {
                let root = self.root.join(controller.name());
                return root
                    .join("cgroup.procs")
                    .is_file()
                    .then(|| Place::V1(root.join(relative(path))));
            }
        }
        let v2 = self.v2_root()?;
        let path = self.own.lines().find_map(|l| l.strip_prefix("0::"))?;
        Some(Place::V2(v2.join(relative(path))))
    }

    /// The `quiver` group for `controller`, when it exists and can limit (on v2: the
    /// controller is enabled in its `cgroup.subtree_control`).
    fn base(&self, controller: Controller) -> Option<Place> {
        match self.own_group(controller)? {
            Place::V1(dir) => {
                let base = dir.join("quiver");
                base.is_dir().then_some(Place::V1(base))
            }
            Place::V2(dir) => {
                let base = dir.join("quiver");
                let enabled = std::fs::read_to_string(base.join("cgroup.subtree_control")).ok()?;
                enabled
                    .split_whitespace()
                    .any(|c| c == controller.name())
                    .then_some(Place::V2(base))
            }
        }
    }

    /// See [`prepare`].
    fn prepare(&self) -> Vec<&'static str> {
        let mut missing = Vec::new();
        for controller in CONTROLLERS {
            if let Some(own) = self.own_group(controller) {
                let base = own.dir().join("quiver");
                let _ = std::fs::create_dir(&base);
                if let Place::V2(dir) = &own {
                    let enable = format!("+{}", controller.name());
                    let _ = std::fs::write(dir.join("cgroup.subtree_control"), &enable);
                    let _ = std::fs::write(base.join("cgroup.subtree_control"), &enable);
                }
            }
            match self.base(controller) {
                Some(place) => sweep(place.dir()),
                None => missing.push(controller.limit()),
            }
        }
        missing
    }
}

/// Makes the `quiver` groups, removes empty groups killed launchers left, and returns the
/// limits this machine cannot enforce (each named for a warning).
pub fn prepare() -> Vec<&'static str> {
    Mounts::real().prepare()
}

/// Removes the empty groups of launchers that are gone. A group is named by its launcher's
/// pid; the group of a live launcher (of this or another Quiver process) may be empty for a
/// moment between its creation and the move of the tool into it, so it is left alone.
fn sweep(base: &Path) {
    if let Ok(entries) = std::fs::read_dir(base) {
        for entry in entries.flatten() {
            let alive = entry
                .file_name()
                .to_str()
                .and_then(|name| name.parse::<u32>().ok())
                .is_some_and(|pid| Path::new("/proc").join(pid.to_string()).exists());
            if !alive && entry.file_type().is_ok_and(|t| t.is_dir()) {
                let _ = std::fs::remove_dir(entry.path());
            }
        }
    }
}

/// The groups of one launcher, with the call's limits written in.
#[derive(Debug)]
pub struct Cgroup {
    places: Vec<(Controller, Place)>,
}

/// Why a group could not be made.
#[derive(Debug, thiserror::Error)]
#[error("cgroup `{}`: {source}", path.display())]
pub struct CgroupError {
    path: PathBuf,
    source: std::io::Error,
}

fn write(dir: &Path, file: &str, value: &str) -> Result<(), CgroupError> {
    let path = dir.join(file);
    std::fs::write(&path, value).map_err(|source| CgroupError { path, source })
}

impl Cgroup {
    /// Makes `quiver/<launcher>` in every controller this machine has, with `limits`.
    pub fn create(launcher: u32, limits: &Limits) -> Result<Cgroup, CgroupError> {
        Cgroup::create_in(&Mounts::real(), launcher, limits)
    }

    fn create_in(mounts: &Mounts, launcher: u32, limits: &Limits) -> Result<Cgroup, CgroupError> {
        let mut places: Vec<(Controller, Place)> = Vec::new();
        for controller in CONTROLLERS {
            let Some(base) = mounts.base(controller) else {
                continue;
            };
            let place = match base {
                Place::V1(dir) => Place::V1(dir.join(launcher.to_string())),
                Place::V2(dir) => Place::V2(dir.join(launcher.to_string())),
            };
            let dir = place.dir().to_owned();
            if !places.iter().any(|(_, p)| p.dir() == dir) {
                let created = std::fs::create_dir(&dir).or_else(|e| {
                    // A group of the same name is a leftover of a dead launcher with this pid.
                    if e.kind() != std::io::ErrorKind::AlreadyExists {
                        return Err(e);
                    }
                    let _ = std::fs::remove_dir(&dir);
                    std::fs::create_dir(&dir)
                });
                created.map_err(|source| CgroupError {
                    path: dir.clone(),
                    source,
                })?;
            }
            limit(controller, &place, limits)?;
            places.push((controller, place));
        }
        Ok(Cgroup { places })
    }

    /// Moves the calling process, which must have a single thread, into the groups. On v1 it
    /// writes `0` to each group's `tasks`: moving only the calling thread skips the kernel's
    /// global lock on every thread group, whose taking waits for an RCU grace period
    /// (milliseconds, on every call) unless the hierarchy is mounted with `favordynmods`
    /// (Linux 5.5 on; older kernels take the lock either way). On v2 it writes `0` to
    /// `cgroup.procs`.
    pub fn join(&self) -> Result<(), CgroupError> {
        for (_, place) in &self.places {
            let file = match place {
                Place::V1(_) => "tasks",
                Place::V2(_) => "cgroup.procs",
            };
            write(place.dir(), file, "0")?;
        }
        Ok(())
    }

    /// Whether the kernel killed a process of the group for going over its memory limit.
    pub fn out_of_memory(&self) -> bool {
        self.places.iter().any(|(controller, place)| {
            let file = match place {
                Place::V1(_) => "memory.oom_control",
                Place::V2(_) => "memory.events",
            };
            *controller == Controller::Memory
                && std::fs::read_to_string(place.dir().join(file)).is_ok_and(|text| {
                    text.lines().any(|line| {
                        line.strip_prefix("oom_kill ")
                            .is_some_and(|n| n.trim() != "0")
                    })
                })
        })
    }

    /// Removes the groups, waiting briefly for the last processes to be gone.
    pub fn remove(&self) {
        for (_, place) in &self.places {
            for _ in 0..100 {
                if std::fs::remove_dir(place.dir()).is_ok() || !place.dir().exists() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        }
    }
}

/// Removes the groups of the launcher `pid` (the runtime calls it after killing one).
pub fn remove_for(pid: u32) {
    let mounts = Mounts::real();
    for controller in CONTROLLERS {
        if let Some(base) = mounts.base(controller) {
            let _ = std::fs::remove_dir(base.dir().join(pid.to_string()));
        }
    }
}

fn limit(controller: Controller, place: &Place, limits: &Limits) -> Result<(), CgroupError> {
    const PERIOD: u64 = 100_000;
    let quota = (limits.cpu_millicores * PERIOD / 1000).max(1000);
    let dir = place.dir();
    match (controller, place) {
        (Controller::Memory, Place::V1(_)) => {
            write(dir, "memory.limit_in_bytes", &limits.memory.to_string())?;
            // No swap beyond the limit, where swap accounting is on.
            if dir.join("memory.memsw.limit_in_bytes").exists() {
                write(
                    dir,
                    "memory.memsw.limit_in_bytes",
                    &limits.memory.to_string(),
                )?;
            }
        }
        (Controller::Memory, Place::V2(_)) => {
            write(dir, "memory.max", &limits.memory.to_string())?;
            if dir.join("memory.swap.max").exists() {
                write(dir, "memory.swap.max", "0")?;
            }
        }
        (Controller::Pids, _) => write(dir, "pids.max", &limits.tasks.to_string())?,
        (Controller::Cpu, Place::V1(_)) => {
            write(dir, "cpu.cfs_period_us", &PERIOD.to_string())?;
            write(dir, "cpu.cfs_quota_us", &quota.to_string())?;
        }
        (Controller::Cpu, Place::V2(_)) => write(dir, "cpu.max", &format!("{quota} {PERIOD}"))?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(path: &Path) -> String {
        std::fs::read_to_string(path).unwrap_or_default()
    }

    fn limits() -> Limits {
        Limits {
            memory: 32 << 20,
            tasks: 16,
            cpu_millicores: 100,
            ..Limits::default()
        }
    }

    /// The v2 path against a fake cgroupfs (this machine delegates no v2 controller, so the
    /// suite exercises v1 for real and v2 only here): the `quiver` group is made and its
    /// controllers enabled, and a launcher's group gets `memory.max`, `pids.max`, `cpu.max`.
    #[test]
    fn the_v2_path_writes_its_limits() {
        for unified in ["", "unified"] {
            let fs = tempfile::tempdir().unwrap();
            let v2 = fs.path().join(unified);
            let own = v2.join("system.slice/quiver.service");
            std::fs::create_dir_all(&own).unwrap();
            std::fs::write(v2.join("cgroup.controllers"), "cpu memory pids\n").unwrap();
            let mounts = Mounts {
                own: "0::/system.slice/quiver.service\n".into(),
                root: fs.path().to_owned(),
            };
            // Nothing delegated yet: every limit is named as missing.
            let missing = mounts.prepare();
            assert_eq!(missing.len(), 3, "{missing:?}");
            let base = own.join("quiver");
            assert!(base.is_dir());
            // Each controller was asked for in both groups (the fake keeps the last write).
            assert_eq!(read(&own.join("cgroup.subtree_control")), "+cpu");
            assert_eq!(read(&base.join("cgroup.subtree_control")), "+cpu");
            // The kernel's answer: the controllers are enabled below `quiver`.
            std::fs::write(base.join("cgroup.subtree_control"), "cpu memory pids\n").unwrap();
            for controller in CONTROLLERS {
                assert_eq!(mounts.base(controller), Some(Place::V2(base.clone())));
            }

            let group = Cgroup::create_in(&mounts, 4242, &limits()).unwrap();
            let dir = base.join("4242");
            assert_eq!(read(&dir.join("memory.max")), (32u64 << 20).to_string());
            assert_eq!(read(&dir.join("pids.max")), "16");
            assert_eq!(read(&dir.join("cpu.max")), "10000 100000");
            assert!(
                !dir.join("memory.swap.max").exists(),
                "only where swap is on"
            );
            group.join().unwrap();
            assert_eq!(read(&dir.join("cgroup.procs")), "0");
            assert!(!group.out_of_memory());
            std::fs::write(
                dir.join("memory.events"),
                "low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\n",
            )
            .unwrap();
            assert!(group.out_of_memory());
        }
    }

    /// The v1 path (as this machine has it) against a fake cgroupfs, and a controller whose
    /// v1 hierarchy is not mounted is missing.
    #[test]
    fn the_v1_path_writes_its_limits() {
        let fs = tempfile::tempdir().unwrap();
        for controller in ["memory", "pids"] {
            let own = fs.path().join(controller).join("job");
            std::fs::create_dir_all(&own).unwrap();
            std::fs::write(fs.path().join(controller).join("cgroup.procs"), "").unwrap();
        }
        let mounts = Mounts {
            own: "4:memory:/job\n8:pids:/job\n1:cpu,cpuacct:/\n".into(),
            root: fs.path().to_owned(),
        };
        assert_eq!(mounts.prepare(), ["the CPU limit of a call"]);
        let dir = fs.path().join("memory/job/quiver/4242");
        let group = Cgroup::create_in(&mounts, 4242, &limits()).unwrap();
        assert_eq!(
            read(&dir.join("memory.limit_in_bytes")),
            (32u64 << 20).to_string()
        );
        assert_eq!(read(&fs.path().join("pids/job/quiver/4242/pids.max")), "16");
        group.join().unwrap();
        assert_eq!(read(&dir.join("tasks")), "0", "v1 moves the calling thread");
        std::fs::write(
            dir.join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
        )
        .unwrap();
        assert!(group.out_of_memory());
    }
}
