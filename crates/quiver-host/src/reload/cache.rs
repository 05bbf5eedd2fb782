//! The last good parse of every package folder under the roots, so a reload reparses only the
//! packages a change touched, and a package whose edit does not load keeps the version that
//! did cleanly (with the new diagnostics beside it, and `package-reload-kept` saying so).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use quiver_catalog::{Root, Scope, scan};
use quiver_package::{Diagnostic, Package, load_package};
use rayon::prelude::*;

/// Which packages a refresh reparses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dirty {
    /// None: the roots are scanned again, and only folders not seen before are parsed.
    Nothing,
    /// The packages these changed paths touch (see [`super::paths::touched`]).
    Paths(Vec<PathBuf>),
    /// Every package (`quiver reload`).
    All,
}

/// One package folder's last parse.
#[derive(Debug, Clone)]
struct Cached {
    scope: Scope,
    /// The last version that loaded without an error, else the latest parse's package.
    good: Option<Package>,
    /// Whether `good` loaded without an error.
    clean: bool,
    /// The diagnostics of the latest parse.
    diagnostics: Vec<Diagnostic>,
}

/// The packages of a set of roots, parsed, keyed by folder.
#[derive(Debug, Default)]
pub struct PackageCache {
    packages: BTreeMap<PathBuf, Cached>,
}

/// What a refresh gives for the catalog: the packages in scan order and every diagnostic.
pub struct Refreshed {
    /// (package, scope), as [`quiver_catalog::Catalog::build`] takes them.
    pub packages: Vec<(Package, Scope)>,
    /// The scan's, then each package's, diagnostics.
    pub diagnostics: Vec<Diagnostic>,
    /// How many folders were parsed.
    pub parsed: usize,
}

impl PackageCache {
    /// The package folders known.
    pub fn folders(&self) -> BTreeSet<PathBuf> {
        self.packages.keys().cloned().collect()
    }

    /// Scans `roots` again and parses the folders that are new or `dirty`; folders no longer
    /// there are forgotten.
    pub fn refresh(&mut self, roots: &[Root], dirty: &Dirty) -> Refreshed {
        let (found, mut diagnostics) = scan::scan(roots);
        let touched = match dirty {
            Dirty::Paths(paths) => super::paths::touched(&self.folders(), paths),
            Dirty::Nothing | Dirty::All => BTreeSet::new(),
        };
        let to_parse: Vec<&scan::Found> = found
            .iter()
            .filter(|f| {
                *dirty == Dirty::All
                    || touched.contains(&f.dir)
                    || self.packages.get(&f.dir).is_none_or(|c| c.scope != f.scope)
            })
            .collect();
        let parsed: Vec<(PathBuf, Scope, quiver_package::Loaded)> = to_parse
            .par_iter()
            .map(|f| (f.dir.clone(), f.scope, load_package(&f.dir)))
            .collect();
        let count = parsed.len();
        let mut next: BTreeMap<PathBuf, Cached> = BTreeMap::new();
        for (dir, scope, loaded) in parsed {
            let previous = self.packages.remove(&dir).filter(|c| c.scope == scope);
            next.insert(dir.clone(), merge(&dir, scope, loaded, previous));
        }
        let mut packages = Vec::with_capacity(found.len());
        for f in &found {
            let cached = match next.remove(&f.dir) {
                Some(cached) => cached,
                None => match self.packages.remove(&f.dir) {
                    Some(cached) => cached,
                    None => continue,
                },
            };
            diagnostics.extend(cached.diagnostics.iter().cloned());
            if let Some(package) = &cached.good {
                packages.push((package.clone(), f.scope));
            }
            next.insert(f.dir.clone(), cached);
        }
        self.packages = next;
        Refreshed {
            packages,
            diagnostics,
            parsed: count,
        }
    }
}

/// The new parse of `dir` over its `previous` one: the new package when it loaded without an
/// error; else the last version that did, kept with a warning beside the new diagnostics;
/// else (no clean version ever loaded) whatever the new parse gave, as a fresh load would.
fn merge(
    dir: &Path,
    scope: Scope,
    loaded: quiver_package::Loaded,
    previous: Option<Cached>,
) -> Cached {
    let quiver_package::Loaded {
        package,
        mut diagnostics,
    } = loaded;
    let clean = package.is_some() && !diagnostics.iter().any(Diagnostic::is_error);
    let kept = previous.filter(|p| p.clean).and_then(|p| p.good);
    let (good, clean) = match (package, kept) {
        (Some(new), _) if clean => (Some(new), true),
        (_, Some(old)) => {
            let warning = Diagnostic::warning(
                "package-reload-kept",
                dir,
                format!(
                    "this edit of package `{}` does not load cleanly; the last version that did is still served",
                    old.id
                ),
            )
            .with_help("fix the errors and save again");
            tracing::warn!(package = %old.id, folder = %dir.display(), "a package's edit does not load; its last good version is kept");
            for d in diagnostics.iter().filter(|d| d.is_error()) {
                tracing::warn!("{d}");
            }
            diagnostics.push(warning);
            (Some(old), true)
        }
        (new, None) => (new, false),
    };
    Cached {
        scope,
        good,
        clean,
        diagnostics,
    }
}

#[cfg(test)]
mod tests;
