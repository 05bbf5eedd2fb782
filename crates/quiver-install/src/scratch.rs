//! The temporary folder a verification unpacks into. An archive is verified by unpacking it
//! whole (the loader lists a skill's files and checks its links on disk), so the folder is put
//! in memory where the system offers it: `/dev/shm` when it is a writable folder, else the
//! system's temporary folder. Nothing is kept: the folder is removed when dropped.

use std::path::Path;

use crate::InstallError;

/// The memory-backed folder tried first.
const MEMORY: &str = "/dev/shm";

/// A new private (`0700`) temporary folder, in memory when the system offers one.
pub fn verify_scratch() -> Result<tempfile::TempDir, InstallError> {
    let memory = Path::new(MEMORY);
    let in_memory = memory
        .is_dir()
        .then(|| {
            tempfile::Builder::new()
                .prefix("quiver-verify-")
                .tempdir_in(memory)
                .ok()
        })
        .flatten();
    match in_memory {
        Some(dir) => Ok(dir),
        None => tempfile::Builder::new()
            .prefix("quiver-verify-")
            .tempdir()
            .map_err(|e| InstallError::Refused(format!("no temporary folder: {e}"))),
    }
}
