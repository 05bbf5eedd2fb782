//! The one check a loaded package passes at `quiver pack`, `quiver verify` and `quiver install`:
//! its load diagnostics (validation and lint) and the declaration check
//! ([`crate::declarations`]: what its code and skill text use against what it declares). Every
//! check a package must pass before it is packed or installed goes into [`check_package`], so
//! the three commands cannot disagree.

use std::path::Path;

use crate::{Diagnostic, Loaded};

/// Every diagnostic of the package loaded from `dir`; an error among them refuses it.
pub fn check_package(dir: &Path, loaded: &Loaded) -> Vec<Diagnostic> {
    finish(dir, loaded, |package| {
        crate::declarations::check_dir(package, crate::env::home().as_deref())
    })
}

/// [`check_package`] for a package whose files' bytes are held in memory (`held`, as
/// [`crate::declarations::check_held`] takes them): the same diagnostics, no file read twice.
pub fn check_package_held(
    dir: &Path,
    loaded: &Loaded,
    held: &[(String, Option<Vec<u8>>)],
) -> Vec<Diagnostic> {
    finish(dir, loaded, |package| {
        crate::declarations::check_held(package, held, crate::env::home().as_deref())
    })
}

/// The load diagnostics, those of `declarations` and the one for a package not loaded.
fn finish(
    dir: &Path,
    loaded: &Loaded,
    declarations: impl FnOnce(&crate::Package) -> Vec<Diagnostic>,
) -> Vec<Diagnostic> {
    let mut diags = loaded.diagnostics.clone();
    if let Some(package) = &loaded.package {
        diags.extend(declarations(package));
    }
    if loaded.package.is_none() && !diags.iter().any(Diagnostic::is_error) {
        diags.push(Diagnostic::error(
            "package-not-loaded",
            dir,
            "no package could be loaded from this folder",
        ));
    }
    diags
}
