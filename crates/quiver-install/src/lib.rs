//! Quiver's package distribution: everything that reads or writes files on the way from a
//! package folder to an installed package. The pure rules (manifest, canonical JSON, digests,
//! path rules, signature verification, permission diff) live in
//! [`quiver_package::distribution`]; this crate does their I/O.
//!
//! - [`pack`]: a folder into a deterministic `.qpkg` (tar.gz whose first entries are
//!   `.quiver/MANIFEST.json` and `.quiver/SIGNATURE.json`).
//! - [`archive`]: reading any archive safely, into a staging folder, checked against its
//!   manifest.
//! - [`keys`] and [`trust`]: the user's signing keys and the publisher keys they trust.
//! - [`summary`]: what a person reads before saying yes to an install.
//! - [`store`]: the content-addressed, read-only store, the installed list under a file lock,
//!   install, update, rollback and uninstall.
//! - [`git`]: package folders from a git repository at a pinned commit.
//! - [`index`]: building and reading a package index folder with a signed snapshot.
//! - [`lockfile`]: `quiver.lock` and `skills-lock.json`.
//! - [`scratch`]: the in-memory temporary folder `quiver verify` unpacks into.
//! - [`bench`](mod@bench): the figures of `quiver bench install`.
//!
//! ```no_run
//! # fn main() -> Result<(), quiver_install::InstallError> {
//! let state = std::path::Path::new("/home/me/.local/share/quiver");
//! let packed = quiver_install::pack::pack_dir(
//!     std::path::Path::new("weather"),
//!     &quiver_install::pack::PackOptions { publisher: "acme".into(), ..Default::default() },
//! )?;
//! std::fs::write("weather.qpkg", &packed.bytes)?;
//! let trust = quiver_install::trust::TrustStore::load(state)?;
//! let staged = quiver_install::store::Store::new(state).stage_archive(
//!     std::path::Path::new("weather.qpkg"),
//!     &trust,
//! )?;
//! println!("{}", staged.manifest.digest());
//! # Ok(()) }
//! ```

pub mod archive;
pub mod bench;
mod error;
pub mod git;
pub mod index;
pub mod keys;
pub mod lockfile;
pub mod pack;
pub mod scratch;
pub mod store;
pub mod summary;
pub mod trust;

pub use error::InstallError;
