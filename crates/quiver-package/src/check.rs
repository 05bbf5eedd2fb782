//! The one check a loaded package passes at `quiver pack`, `quiver verify` and `quiver install`:
//! its load diagnostics (validation and lint) and the declaration check
//! ([`crate::declarations`]: what its code and skill text use against what it declares). Every
//! check a package must pass before it is packed or installed goes into [`check_package`], so
//! the three commands cannot disagree.

use std::path::Path;

use crate::{Diagnostic, Loaded};

/// Every diagnostic of the package loaded from `dir`; an error among them refuses it.
pub fn check_package(dir: &Path, loaded: &Loaded) -> Vec<Diagnostic> {
    let mut diags = loaded.diagnostics.clone();
    if let Some(package) = &loaded.package {
        diags.extend(crate::declarations::check_dir(
            package,
            crate::env::home().as_deref(),
        ));
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
