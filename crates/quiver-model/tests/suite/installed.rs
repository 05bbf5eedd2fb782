//! Installed packages as a road: a generated package packed into the content-addressed store
//! (`quiver install --allow-unsigned`'s library path: `Store::stage_folder`, `Store::commit`)
//! and loaded as the host loads it, one installed root each (`quiver_host::paths::installed_roots`).

use std::path::Path;

use quiver_catalog::{Catalog, CatalogOptions, Root, Scope};
use quiver_install::store::{CommitOptions, Store};
use quiver_model::rules::Session;
use quiver_model::world::World;
use quiver_model::write::write_world;

/// The catalog over the project root `packages` after the packages in the bit mask
/// `installed` are installed into the state folder `state` and removed from the project root.
/// A package the install refuses is left out, as `quiver install` leaves it; its index is
/// returned beside the catalog.
pub fn catalog(state: &Path, packages: &Path, installed: u32) -> (Catalog, Vec<u32>) {
    if installed == 0 {
        return (Catalog::load_dirs(&[packages]), Vec::new());
    }
    let mut refused = Vec::new();
    let store = Store::new(state);
    let mut folders: Vec<_> = std::fs::read_dir(packages)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    folders.sort();
    for folder in folders {
        let Some(p) = package_index(&folder) else {
            continue;
        };
        if installed & (1 << p) == 0 {
            continue;
        }
        match store.stage_folder(&folder, Some("quiver-model")) {
            Ok(staged) => drop(store.commit(staged, &CommitOptions::default()).unwrap()),
            Err(_) => refused.push(p),
        }
        std::fs::remove_dir_all(&folder).unwrap();
    }
    (load(state, packages), refused)
}

/// The catalog over the project root `packages` and the packages installed in `state`.
pub fn load(state: &Path, packages: &Path) -> Catalog {
    let mut roots = vec![Root {
        path: packages.to_path_buf(),
        scope: Scope::Project,
    }];
    roots.extend(quiver_host::paths::installed_roots(state));
    Catalog::load(&roots, &CatalogOptions::default())
}

/// `p3` → 3.
fn package_index(folder: &Path) -> Option<u32> {
    folder
        .file_name()?
        .to_str()?
        .strip_prefix('p')?
        .parse()
        .ok()
}

/// The packages of `world` in the bit mask `mask` that the model says `quiver install` takes.
pub fn installable(world: &World, mask: u32) -> u32 {
    (0..world.packages.len())
        .filter(|p| mask & (1 << p) != 0 && Session::installable(world, *p))
        .fold(0, |m, p| m | (1 << p))
}

#[cfg(test)]
mod tests {
    use proptest::strategy::{Strategy, ValueTree};
    use proptest::test_runner::TestRunner;
    use quiver_model::world::{Package, Skill, Tool};

    use super::*;

    /// The model's `installable` agrees with the install's declaration check on generated
    /// packages.
    #[test]
    fn the_model_knows_which_generated_packages_install() {
        let mut runner = TestRunner::deterministic();
        let (mut took, mut refused) = (0, 0);
        for _ in 0..40 {
            let world = quiver_model::generate::world()
                .new_tree(&mut runner)
                .unwrap()
                .current();
            let dir = tempfile::tempdir().unwrap();
            write_world(&world, dir.path()).unwrap();
            for p in 0..world.packages.len() {
                let folder = dir.path().join(format!("p{p}"));
                let loaded = quiver_package::load_package(&folder);
                let errors: Vec<String> = quiver_package::check::check_package(&folder, &loaded)
                    .iter()
                    .filter(|d| d.is_error())
                    .map(|d| d.to_string())
                    .collect();
                let model = Session::installable(&world, p);
                assert_eq!(model, errors.is_empty(), "p{p} of {world:?}: {errors:?}");
                if model {
                    took += 1
                } else {
                    refused += 1
                }
                assert!(Session::installable(&Session::tidied(&world), p));
            }
        }
        assert!(took > 0 && refused > 0, "took {took}, refused {refused}");
    }

    /// A package whose skill unlocks another package's tool is refused at install and absent
    /// from the catalog; the package installed beside it loads.
    #[test]
    fn a_refused_package_is_absent_from_the_catalog() {
        let tool = Tool {
            expose: true,
            hidden: false,
            category: quiver_model::world::Category::Perception,
            approval: quiver_model::world::Approval::Never,
            dangerous: false,
            restrict: quiver_model::world::Restrict::None,
            secret: false,
        };
        let skill = Skill {
            restrict: quiver_model::world::Restrict::None,
            tools: Some(vec!["p1.t0".into()]),
            allowed: Vec::new(),
            disallowed: Vec::new(),
            fork: None,
            scoped: Vec::new(),
            script: false,
        };
        let plain = Package {
            tools: vec![tool],
            ..Package::default()
        };
        let world = World {
            packages: vec![
                Package {
                    root_skill: Some(skill),
                    ..plain.clone()
                },
                plain,
            ],
        };
        assert_eq!(installable(&world, 0b11), 0b10);
        let dir = tempfile::tempdir().unwrap();
        let packages = dir.path().join("packages");
        write_world(&world, &packages).unwrap();
        let (catalog, refused) = catalog(dir.path(), &packages, 0b11);
        assert_eq!(refused, vec![0]);
        let ids: Vec<String> = (catalog.packages().iter())
            .map(|p| p.package.id.to_string())
            .collect();
        assert_eq!(ids, vec!["p1"]);
    }
}
