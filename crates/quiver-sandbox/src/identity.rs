//! Each package's own user: when Quiver runs as root, a package's tools run as a uid (and gid)
//! of their own, derived from the name of its data folder (its id, or, for a folder that does
//! not own the id, its id and a hash of the folder; see [`crate::ownership`]), so the process
//! limit of one package never stops another's, and files one package writes are not another's.
//!
//! The uid is `FIRST_UID + fnv1a64(package) % UID_COUNT`: stable across runs and machines,
//! outside the ranges distributions hand out to people (below 60000) and to user namespaces
//! (`/etc/subuid` starts at 100000 with 65536 each), and in no `/etc/passwd`. Two packages
//! share a uid only when their ids collide in the hash (a chance of about 1 in 2,000 among
//! 1,000 packages); their data folders are still apart (each is mounted only for its own
//! package).

use std::io;
use std::path::Path;

/// The first uid of the range package users are drawn from.
pub const FIRST_UID: u32 = 1_000_000_000;
/// How many uids the range holds.
pub const UID_COUNT: u32 = 1 << 30;

/// The uid (and gid) the tools of `package` run as.
pub fn package_uid(package: &str) -> u32 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0100_0000_01b3;
    let hash = package.bytes().fold(OFFSET, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(PRIME)
    });
    FIRST_UID + (hash % u64::from(UID_COUNT)) as u32
}

/// Gives `dir` (the package's data folder) and everything in it to `uid`, unless it is theirs
/// already. Links are changed, never followed.
pub(crate) fn own(dir: &Path, uid: u32) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    if std::fs::symlink_metadata(dir)?.uid() == uid {
        return Ok(());
    }
    chown_tree(dir, uid)
}

fn chown_tree(path: &Path, uid: u32) -> io::Result<()> {
    let meta = std::fs::symlink_metadata(path)?;
    if meta.is_dir() {
        for entry in std::fs::read_dir(path)? {
            chown_tree(&entry?.path(), uid)?;
        }
    }
    std::os::unix::fs::lchown(path, Some(uid), Some(uid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uids_are_stable_apart_and_in_range() {
        let long = "x".repeat(200);
        let cases = ["notes", "weather", "notes2", "a", long.as_str()];
        let uids: Vec<u32> = cases.iter().map(|p| package_uid(p)).collect();
        for (case, uid) in cases.iter().zip(&uids) {
            assert_eq!(package_uid(case), *uid, "stable for {case}");
            assert!(
                (FIRST_UID..FIRST_UID + UID_COUNT).contains(uid),
                "{case}: {uid}"
            );
        }
        let mut sorted = uids.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), uids.len(), "distinct: {uids:?}");
    }
}
