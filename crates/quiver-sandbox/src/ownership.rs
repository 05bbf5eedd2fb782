//! Whose a package id's data is: the package folder that first ran a tool under the id owns
//! `data/<id>` (recorded in `owners/<id>` of the state folder, which no tool can see or
//! write). Any other folder claiming the id (a shadowed copy, a project package the operator
//! let take the id over, a package moved elsewhere) gets a data folder and a uid of its own,
//! `<id>@<hash of its path>`, and never the owner's files (issue 13 item 11).
//!
//! A data folder from before owners were recorded goes to the first package that runs under
//! its id afterwards.

use std::ffi::OsStr;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// The name of the data folder (and the key of the uid) a package at `package_dir` with id
/// `id` gets, given the id's recorded owner: its id when it is the owner or there is none
/// yet, else its id and a hash of its folder.
pub fn data_key(id: &str, package_dir: &Path, owner: Option<&Path>) -> String {
    match owner {
        None => id.to_owned(),
        Some(owner) if owner == package_dir => id.to_owned(),
        Some(_) => format!("{id}@{:016x}", fnv1a64(package_dir.as_os_str().as_bytes())),
    }
}

/// Reads, or for the first claimant records, the owner of `id` under `state_dir`, and returns
/// the data key of the package at `package_dir` (canonical). Recording is atomic: of two
/// processes claiming a new id at once, one owns it.
pub(crate) fn claim(state_dir: &Path, id: &str, package_dir: &Path) -> io::Result<String> {
    let owners = state_dir.join("owners");
    std::fs::create_dir_all(&owners)?;
    let record = owners.join(id);
    if !record.exists() {
        // Written whole under a name of its own, then linked into place: a reader never sees
        // a half-written record, and a link that exists already means another claimant won.
        // Its own name per claim: two threads of one process may claim one id at once.
        static CLAIMS: AtomicU64 = AtomicU64::new(0);
        let claim = CLAIMS.fetch_add(1, Ordering::Relaxed);
        let draft = owners.join(format!(".{id}.{}.{claim}", std::process::id()));
        let mut file = std::fs::File::create(&draft)?;
        file.write_all(package_dir.as_os_str().as_bytes())?;
        file.sync_all()?;
        let linked = std::fs::hard_link(&draft, &record);
        std::fs::remove_file(&draft)?;
        match linked {
            Ok(()) => return Ok(data_key(id, package_dir, None)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    let owner = std::fs::read(&record)?;
    Ok(data_key(
        id,
        package_dir,
        Some(Path::new(OsStr::from_bytes(&owner))),
    ))
}

fn fnv1a64(bytes: &[u8]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0100_0000_01b3;
    bytes.iter().fold(OFFSET, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(PRIME)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_owner_keeps_the_id_and_every_other_folder_gets_its_own() {
        let mine = Path::new("/home/a/.quiver/packages/notes");
        let other = Path::new("/srv/project/.quiver/packages/notes");
        let cases: [(Option<&Path>, &Path, bool); 4] = [
            (None, mine, true),
            (Some(mine), mine, true),
            (Some(mine), other, false),
            (Some(other), mine, false),
        ];
        for (owner, dir, owns) in cases {
            let key = data_key("notes", dir, owner);
            assert_eq!(key == "notes", owns, "{owner:?} {dir:?}: {key}");
            assert!(key.starts_with("notes"));
        }
        // Stable, and apart for two claimants.
        assert_eq!(
            data_key("notes", other, Some(mine)),
            data_key("notes", other, Some(mine))
        );
        let third = Path::new("/tmp/notes");
        assert_ne!(
            data_key("notes", other, Some(mine)),
            data_key("notes", third, Some(mine))
        );
    }

    #[test]
    fn the_first_claimant_is_recorded_and_later_ones_are_told_apart() {
        let state = tempfile::tempdir().unwrap();
        let (a, b) = (Path::new("/p/a/notes"), Path::new("/p/b/notes"));
        assert_eq!(claim(state.path(), "notes", a).unwrap(), "notes");
        assert_eq!(claim(state.path(), "notes", a).unwrap(), "notes");
        let other = claim(state.path(), "notes", b).unwrap();
        assert!(other.starts_with("notes@"), "{other}");
        assert_eq!(claim(state.path(), "weather", b).unwrap(), "weather");
    }

    #[test]
    fn of_folders_claiming_a_new_id_at_once_exactly_one_owns_it() {
        let state = tempfile::tempdir().unwrap();
        let owners: usize = std::thread::scope(|scope| {
            let claims: Vec<_> = (0..8)
                .map(|i| {
                    let state = state.path();
                    scope.spawn(move || {
                        let dir = std::path::PathBuf::from(format!("/p/{i}/notes"));
                        claim(state, "notes", &dir).unwrap() == "notes"
                    })
                })
                .collect();
            claims
                .into_iter()
                .map(|c| usize::from(c.join().unwrap()))
                .sum()
        });
        assert_eq!(owners, 1);
    }
}
