//! The data folder's disk budget: its use is the blocks its files take (links are not
//! followed), measured by the launcher before a call and every 200 ms while the tool runs.
//! A call that starts over the budget is refused, one that writes past it is stopped; what it
//! can write between two measurements is bounded by the write rate (and each file by
//! `RLIMIT_FSIZE`).

use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Entries walked at most; a folder with more counts as over any budget.
const MAX_ENTRIES: usize = 200_000;

/// Bytes of disk the files under `dir` take (`u64::MAX` past [`MAX_ENTRIES`]).
pub fn usage(dir: &Path) -> u64 {
    let mut total = 0u64;
    let mut seen = 0usize;
    let mut stack = vec![dir.to_owned()];
    while let Some(path) = stack.pop() {
        seen += 1;
        if seen > MAX_ENTRIES {
            return u64::MAX;
        }
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        total = total.saturating_add(meta.blocks() * 512);
        if meta.is_dir()
            && let Ok(entries) = std::fs::read_dir(&path)
        {
            stack.extend(entries.flatten().map(|e| e.path()));
        }
    }
    total
}

#[cfg(test)]
mod tests {
    #[test]
    fn usage_counts_files_below_and_not_through_links() {
        let dir = tempfile::tempdir().unwrap();
        let empty = super::usage(dir.path());
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/big"), vec![1u8; 1 << 20]).unwrap();
        std::os::unix::fs::symlink("/usr", dir.path().join("link")).unwrap();
        let used = super::usage(dir.path());
        assert!(used >= empty + (1 << 20), "{used}");
        assert!(used < empty + (2 << 20), "links are not followed: {used}");
    }
}
