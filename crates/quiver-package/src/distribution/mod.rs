//! What a package is once it leaves its folder: the pack manifest (every file with its size,
//! digest and mode, in canonical JSON, whose digest names the package), the rules an archive's
//! paths must follow, ed25519 signatures over the manifest and the trust they need, and the
//! permission diff an update shows. Pure: no file is read or written here
//! (`quiver-install` does the I/O).

pub mod canonical;
pub mod index;
pub mod manifest;
pub mod paths;
pub mod permission_diff;
pub mod python_env;
pub mod signature;

pub use manifest::{FileEntry, ManifestError, PackManifest, PackPermissions};
