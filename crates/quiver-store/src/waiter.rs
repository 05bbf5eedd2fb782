//! Who waits for an approval: a process named by the machine's boot id, its PID namespace, its
//! pid and its start time (`/proc/<pid>/stat`, field 22), so a pid the kernel gave to another
//! process later, or a card from before a reboot, never passes for the waiter. A waiter in
//! another PID namespace (a `quiver serve` in a container, `quiver approvals` on the host)
//! cannot be checked from here and counts as alive.

use std::path::Path;

/// The waiter string of this process (`<boot id>:<pid namespace>:<pid>:<start time>`), `None`
/// where `/proc` cannot say (then a card is never withdrawn for its waiter).
pub fn current() -> Option<String> {
    // A process's name never changes, so it is read from `/proc` once (per pid: a forked
    // child reads its own).
    static CURRENT: std::sync::Mutex<Option<(u32, Option<String>)>> = std::sync::Mutex::new(None);
    let pid = std::process::id();
    let mut cached = CURRENT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    match cached.as_ref() {
        Some((known, name)) if *known == pid => name.clone(),
        _ => {
            let name = of(pid);
            *cached = Some((pid, name.clone()));
            name
        }
    }
}

/// The waiter string of the process `pid` of this PID namespace, `None` where `/proc` cannot
/// say (or no such process runs).
pub fn of(pid: u32) -> Option<String> {
    let proc = Path::new("/proc");
    Some(format!(
        "{}:{}:{pid}:{}",
        boot_id(proc)?,
        pid_namespace(proc)?,
        start_time(proc, pid)?
    ))
}

/// The pid of the process a waiter string names, when it is a process of this boot and this
/// PID namespace that still runs (the same start time): only then may this process signal it.
/// `None` for one that is gone, one of another namespace, and a string this build cannot read.
pub fn running_here(waiter: &str) -> Option<u32> {
    running_in(Path::new("/proc"), waiter)
}

fn running_in(proc: &Path, waiter: &str) -> Option<u32> {
    let mut parts = waiter.rsplitn(4, ':');
    let (start, pid, namespace, boot) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let (pid, start) = (pid.parse::<u32>().ok()?, start.parse::<u64>().ok()?);
    (boot_id(proc)? == boot && pid_namespace(proc)? == namespace && start_time(proc, pid)? == start)
        .then_some(pid)
}

/// Whether the process a waiter string names still runs. A string this build cannot read
/// counts as alive: a card is withdrawn only when its waiter is known to be gone.
pub fn alive(waiter: &str) -> bool {
    alive_in(Path::new("/proc"), waiter)
}

/// [`alive`] against a `/proc` at `proc` (tests use a fake one).
fn alive_in(proc: &Path, waiter: &str) -> bool {
    let mut parts = waiter.rsplitn(4, ':');
    let (Some(start), Some(pid), Some(namespace), Some(boot)) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return true;
    };
    let (Ok(pid), Ok(start)) = (pid.parse::<u32>(), start.parse::<u64>()) else {
        return true;
    };
    match (boot_id(proc), pid_namespace(proc)) {
        (Some(now), _) if now != boot => false,
        (Some(_), Some(here)) if here == namespace => start_time(proc, pid) == Some(start),
        // Another PID namespace, or `/proc` cannot say: not known to be gone.
        _ => true,
    }
}

/// This process's PID namespace (the inode of `/proc/self/ns/pid`), without colons.
fn pid_namespace(proc: &Path) -> Option<String> {
    let link = std::fs::read_link(proc.join("self/ns/pid")).ok()?;
    let text = link.to_string_lossy();
    let inode = text.strip_prefix("pid:[")?.strip_suffix(']')?;
    Some(inode.to_owned())
}

fn boot_id(proc: &Path) -> Option<String> {
    let text = std::fs::read_to_string(proc.join("sys/kernel/random/boot_id")).ok()?;
    Some(text.trim().to_owned())
}

/// Field 22 of `/proc/<pid>/stat`, read after the command name's closing parenthesis (a name
/// may hold spaces and parentheses).
fn start_time(proc: &Path, pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(proc.join(pid.to_string()).join("stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    // Fields 3.. follow the name; the start time is field 22.
    rest.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_proc(boot: &str, processes: &[(u32, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let random = dir.path().join("sys/kernel/random");
        std::fs::create_dir_all(&random).unwrap();
        std::fs::write(random.join("boot_id"), format!("{boot}\n")).unwrap();
        std::fs::create_dir_all(dir.path().join("self/ns")).unwrap();
        std::os::unix::fs::symlink("pid:[4026531836]", dir.path().join("self/ns/pid")).unwrap();
        for (pid, name_and_start) in processes {
            let (name, start) = name_and_start.split_once('|').unwrap();
            let process = dir.path().join(pid.to_string());
            std::fs::create_dir_all(&process).unwrap();
            let fields: Vec<String> = (3..=52)
                .map(|i| {
                    if i == 22 {
                        start.to_owned()
                    } else {
                        "0".into()
                    }
                })
                .collect();
            std::fs::write(
                process.join("stat"),
                format!("{pid} ({name}) {}\n", fields.join(" ")),
            )
            .unwrap();
        }
        dir
    }

    #[test]
    fn only_a_running_process_of_this_namespace_may_be_signalled() {
        let proc = fake_proc("b-1", &[(40, "quiver|777")]);
        let cases = [
            ("b-1:4026531836:40:777", Some(40)),
            ("b-1:4026531836:40:778", None),
            ("b-1:4026531836:42:777", None),
            ("b-0:4026531836:40:777", None),
            ("b-1:4026532999:40:777", None),
            ("not a waiter", None),
        ];
        for (waiter, want) in cases {
            assert_eq!(running_in(proc.path(), waiter), want, "{waiter}");
        }
    }

    #[test]
    fn a_waiter_is_alive_only_while_its_process_runs() {
        let proc = fake_proc("b-1", &[(40, "quiver|777"), (41, "odd) name (x|5")]);
        let cases = [
            ("b-1:4026531836:40:777", true),
            ("b-1:4026531836:41:5", true),
            ("b-1:4026531836:40:778", false),
            ("b-1:4026531836:42:777", false),
            ("b-0:4026531836:40:777", false),
            // Another PID namespace: its pids mean nothing here.
            ("b-1:4026532999:42:777", true),
            ("not a waiter", true),
            ("b-1:4026531836:x:1", true),
            ("b-1:40:777", true),
        ];
        for (waiter, want) in cases {
            assert_eq!(alive_in(proc.path(), waiter), want, "{waiter}");
        }
    }

    #[test]
    fn this_process_is_its_own_live_waiter() {
        let me = current().unwrap();
        assert!(alive(&me), "{me}");
        let gone = me
            .rsplit_once(':')
            .map(|(head, start)| format!("{head}:{}", start.parse::<u64>().unwrap() + 1));
        assert!(!alive(&gone.unwrap()));
    }
}
