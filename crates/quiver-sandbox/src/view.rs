//! The tool's mount view: a root built for it in a mount namespace of its own, holding only
//! what its policy grants, each path mounted at the path it has on the host.
//!
//! As bubblewrap does, the launcher's child (still root, PID 1 of its PID namespace) makes
//! every mount private, mounts a small tmpfs over `/tmp` and pivots into it, so the host's
//! root is reachable at `/oldroot` while the new root is built at `/newroot`:
//!
//! 1. every path of the policy (read-only for `read` and `read_exec`, read-write for
//!    `read_write`) is bind-mounted at its own path, parents first (not recursively: mounts
//!    below a granted folder are not carried along); a symbolic link whose target the view
//!    holds is recreated as a link (`/bin -> usr/bin`), any other is followed;
//! 2. every `hidden` path a granted folder would show (Quiver's state folder, the config file)
//!    is covered: a folder by an empty read-only tmpfs, a file by an empty read-only file;
//! 3. the granted paths inside a hidden one (the package's own data folder, the package
//!    folder of an external MCP server) are mounted back on top, and any hidden path inside
//!    them covered again;
//! 4. `/proc` of the tool's own PID namespace; a private, size-limited tmpfs on `/tmp` is
//!    mounted before step 1's paths below it (unless `/tmp` itself is granted: then the
//!    host's, minus the hidden paths);
//! 5. every mount of the new root is made read-only, `nosuid` and `nodev` at once
//!    (`mount_setattr` with `AT_RECURSIVE`), then the read-write ones are made writable and
//!    `noexec` again and the `/dev` nodes' `nodev` lifted, one call each;
//! 6. the new root is pivoted into, and the skeleton with the host's root below it detached
//!    in one lazy unmount.
//!
//! Only the mounts' own flags change, never their file systems'.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::io;
use std::path::{Component, Path, PathBuf};

use rustix::mount::{
    MountFlags, MountPropagationFlags, UnmountFlags, mount, mount_bind, mount_change, unmount,
};

use crate::policy::Policy;
use crate::sys::mount_attr::{NODEV, NOEXEC, NOSUID, RDONLY};

/// A granted path and whether it is writable.
type Entry = (PathBuf, bool);

/// A mount of the new root whose flags differ from the view's read-only default: where it
/// is, the flags to set and the flags to clear.
type Loosened = (PathBuf, u64, u64);

/// Where the skeleton is built (inside the launcher's own mount namespace).
const BASE: &str = "/tmp";
/// The host's root, seen from the skeleton.
const OLD: &str = "/oldroot";
/// The tool's root, seen from the skeleton.
const NEW: &str = "/newroot";

/// A step of building the view that failed.
#[derive(Debug, thiserror::Error)]
#[error("building the mount view: {what} `{}`: {source}", path.display())]
pub struct ViewError {
    what: &'static str,
    path: PathBuf,
    source: io::Error,
}

fn at(what: &'static str, path: &Path) -> impl FnOnce(rustix::io::Errno) -> ViewError {
    let path = path.to_owned();
    move |e| ViewError {
        what,
        path,
        source: e.into(),
    }
}

fn io_at(what: &'static str, path: &Path) -> impl FnOnce(io::Error) -> ViewError {
    let path = path.to_owned();
    move |source| ViewError { what, path, source }
}

/// `path` below `root` (`/usr` under `/newroot` is `/newroot/usr`).
fn under(root: &str, path: &Path) -> PathBuf {
    let mut out = PathBuf::from(root);
    out.extend(
        path.components()
            .filter(|c| matches!(c, Component::Normal(_))),
    );
    out
}

fn depth(path: &Path) -> usize {
    path.components().count()
}

/// Builds the view for `policy` and enters it. Call in a single-threaded process that is
/// root in its user namespace, after `unshare(CLONE_NEWNS)` and inside the tool's PID
/// namespace (for `/proc`).
pub fn enter(policy: &Policy, tmp_bytes: u64) -> Result<(), ViewError> {
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o022));
    let root = Path::new("/");
    mount_change(
        root,
        MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
    )
    .map_err(at("making mounts private", root))?;
    tmpfs(
        Path::new(BASE),
        "size=1m,mode=0755",
        MountFlags::NOSUID | MountFlags::NODEV,
    )?;
    for dir in [OLD, NEW] {
        let inside = Path::new(BASE).join(dir.trim_start_matches('/'));
        std::fs::create_dir(&inside).map_err(io_at("creating", &inside))?;
    }
    let old = Path::new(BASE).join(OLD.trim_start_matches('/'));
    rustix::process::pivot_root(BASE, &old).map_err(at("pivoting into", Path::new(BASE)))?;
    std::env::set_current_dir("/").map_err(io_at("entering", root))?;
    tmpfs(
        Path::new(NEW),
        "size=4m,mode=0755",
        MountFlags::NOSUID | MountFlags::NODEV,
    )?;

    let entries = entries(policy);
    let (inside_hidden, outside): (Vec<&Entry>, Vec<&Entry>) = entries
        .iter()
        .partition(|(path, _)| policy.hidden.iter().any(|h| path.starts_with(h)));
    let tmp = Path::new("/tmp");
    let (roots, rest): (Vec<&Entry>, Vec<&Entry>) = outside
        .iter()
        .copied()
        .partition(|(path, _)| path == Path::new("/"));
    let mut loosened: Vec<Loosened> = Vec::new();
    for (path, writable) in &roots {
        place(path, *writable, &entries, &mut loosened)?;
    }
    if !entries.iter().any(|(path, _)| path == tmp) {
        let private = under(NEW, tmp);
        std::fs::create_dir_all(&private).map_err(io_at("creating", &private))?;
        tmpfs(
            &private,
            &format!("size={tmp_bytes},mode=1777"),
            MountFlags::NOSUID | MountFlags::NODEV,
        )?;
        loosened.push((private, 0, RDONLY));
    }
    for (path, writable) in &rest {
        if !covered(path, *writable, &outside) {
            place(path, *writable, &entries, &mut loosened)?;
        }
    }
    for hidden in &policy.hidden {
        if outside.iter().any(|(path, _)| hidden.starts_with(path)) {
            cover(hidden)?;
        }
    }
    for (path, writable) in &inside_hidden {
        place(path, *writable, &entries, &mut loosened)?;
    }
    // A hidden path inside a folder mounted back (the package folder, the data folder) is
    // covered again: hidden paths stay hidden whatever else is granted.
    for hidden in &policy.hidden {
        if inside_hidden
            .iter()
            .any(|(path, _)| hidden.starts_with(path) && hidden != path)
        {
            cover(hidden)?;
        }
    }
    let proc_dir = under(NEW, Path::new("/proc"));
    std::fs::create_dir_all(&proc_dir).map_err(io_at("creating", &proc_dir))?;
    let new = Path::new(NEW);
    crate::sys::mount_setattr(new, true, RDONLY | NOSUID | NODEV, 0)
        .map_err(io_at("making read-only", new))?;
    for (target, set, clear) in &loosened {
        crate::sys::mount_setattr(target, false, *set, *clear)
            .map_err(io_at("setting the flags of", target))?;
    }
    mount(
        "proc",
        &proc_dir,
        "proc",
        MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
        None,
    )
    .map_err(at("mounting /proc on", &proc_dir))?;
    std::env::set_current_dir(NEW).map_err(io_at("entering", Path::new(NEW)))?;
    rustix::process::pivot_root(".", ".").map_err(at("pivoting into", Path::new(NEW)))?;
    // The skeleton is stacked on the new root now; detaching it detaches the host's root
    // (`/oldroot`) below it too, in one unmount.
    unmount(".", UnmountFlags::DETACH).map_err(at("detaching", Path::new("/")))?;
    std::env::set_current_dir("/").map_err(io_at("entering", root))
}

/// Every granted path once: writable when any list grants writing. Paths equal to a hidden
/// one are dropped (the runtime never grants them; this keeps it so).
fn entries(policy: &Policy) -> Vec<Entry> {
    let mut map: BTreeMap<PathBuf, bool> = BTreeMap::new();
    let read = policy.read_exec.iter().chain(&policy.read);
    for (path, writable) in read
        .map(|p| (p, false))
        .chain(policy.read_write.iter().map(|p| (p, true)))
    {
        if path.is_absolute() && !policy.hidden.contains(path) {
            let slot = map.entry(path.clone()).or_insert(writable);
            *slot |= writable;
        }
    }
    let mut entries: Vec<_> = map.into_iter().collect();
    entries.sort_by_key(|(path, _)| depth(path));
    entries
}

/// Whether a shallower entry with the same access already shows `path` (never `/`, whose
/// `/tmp` the private tmpfs covers).
fn covered(path: &Path, writable: bool, entries: &[&Entry]) -> bool {
    entries.iter().any(|(other, w)| {
        other != path && other != Path::new("/") && path.starts_with(other) && *w == writable
    })
}

/// The host's `path` with every symbolic link resolved against the host's root (the
/// skeleton's own root is not the host's, so the kernel would resolve absolute links wrongly);
/// `None` when it does not exist or links loop.
fn resolve(path: &Path) -> Option<PathBuf> {
    let mut done = PathBuf::from("/");
    let mut todo: Vec<PathBuf> = path
        .components()
        .rev()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(PathBuf::from(name)),
            Component::ParentDir => Some(PathBuf::from("..")),
            _ => None,
        })
        .collect();
    let mut hops = 0;
    while let Some(name) = todo.pop() {
        if name == Path::new("..") {
            done.pop();
            continue;
        }
        let next = done.join(&name);
        let meta = std::fs::symlink_metadata(under(OLD, &next)).ok()?;
        if !meta.file_type().is_symlink() {
            done = next;
            continue;
        }
        hops += 1;
        if hops > 40 {
            return None;
        }
        let link = std::fs::read_link(under(OLD, &next)).ok()?;
        if link.is_absolute() {
            done = PathBuf::from("/");
        }
        todo.extend(link.components().rev().filter_map(|c| match c {
            Component::Normal(name) => Some(PathBuf::from(name)),
            Component::ParentDir => Some(PathBuf::from("..")),
            _ => None,
        }));
    }
    Some(done)
}

/// Mounts the host's `path` at the same place in the new root; a writable one or a `/dev`
/// node goes into `loosened`.
fn place(
    path: &Path,
    writable: bool,
    entries: &[Entry],
    loosened: &mut Vec<Loosened>,
) -> Result<(), ViewError> {
    let Some(real) = resolve(path) else {
        return Ok(());
    };
    let target = under(NEW, path);
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent).map_err(io_at("creating", parent))?;
    }
    let host = under(OLD, &real);
    if real != path
        && let Ok(link) = std::fs::read_link(under(OLD, path))
        && entries.iter().any(|(p, _)| real.starts_with(p))
    {
        if std::fs::symlink_metadata(&target).is_err() {
            std::os::unix::fs::symlink(&link, &target).map_err(io_at("linking", &target))?;
        }
        return Ok(());
    }
    if host.is_dir() {
        if !target.exists() {
            std::fs::create_dir(&target).map_err(io_at("creating", &target))?;
        }
    } else if !target.exists() {
        std::fs::File::create(&target).map_err(io_at("creating", &target))?;
    }
    mount_bind(&host, &target).map_err(at("mounting", path))?;
    let (mut set, mut clear) = (0, 0);
    if writable {
        set |= NOEXEC;
        clear |= RDONLY;
    }
    if path.starts_with("/dev") {
        clear |= NODEV;
    }
    if set | clear != 0 {
        loosened.push((target, set, clear));
    }
    Ok(())
}

/// Covers the hidden `path` in the new root (made read-only with the rest of it): a folder
/// by an empty tmpfs, a file by an empty file; nothing when the host has nothing there.
fn cover(path: &Path) -> Result<(), ViewError> {
    let target = under(NEW, path);
    let Ok(meta) = std::fs::symlink_metadata(&target) else {
        return Ok(());
    };
    if meta.is_dir() {
        tmpfs(
            &target,
            "size=1m,mode=0755",
            MountFlags::NOSUID | MountFlags::NODEV,
        )
    } else {
        let empty = Path::new("/empty");
        if !empty.exists() {
            std::fs::File::create(empty).map_err(io_at("creating", empty))?;
        }
        mount_bind(empty, &target).map_err(at("covering", path))
    }
}

fn tmpfs(target: &Path, options: &str, flags: MountFlags) -> Result<(), ViewError> {
    let data = CString::new(options).map_err(|e| ViewError {
        what: "tmpfs options for",
        path: target.to_owned(),
        source: io::Error::new(io::ErrorKind::InvalidInput, e),
    })?;
    mount("tmpfs", target, "tmpfs", flags, Some(data.as_c_str()))
        .map_err(at("mounting a tmpfs on", target))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_map_under_a_root() {
        let cases = [
            ("/usr", "/newroot/usr"),
            ("/etc/ssl/certs", "/newroot/etc/ssl/certs"),
            ("/", "/newroot"),
        ];
        for (path, expected) in cases {
            assert_eq!(
                under(NEW, Path::new(path)),
                PathBuf::from(expected),
                "{path}"
            );
        }
    }
}
