//! Where an installed package's Python environment lives: `quiver install` makes it from the
//! package's `requirements.txt` (see [`crate::requirements`]) in `<state>/envs/<digest hex>/`,
//! beside the read-only store folder `<state>/store/<digest hex>/` of the same version, and the
//! runtime runs that package's tools in it. The environment is complete only once its
//! [`COMPLETE`] marker exists (written last). Pure: paths in, paths out.

use std::path::{Path, PathBuf};

/// The file, at the root of a package folder, whose presence gives an installed package an
/// environment.
pub const REQUIREMENTS: &str = "requirements.txt";

/// The file written last into a finished environment.
pub const COMPLETE: &str = ".quiver-complete";

/// `<state>/envs/<hex>` for the package digest `sha256:<hex>`.
pub fn env_dir(state: &Path, digest: &str) -> PathBuf {
    state
        .join("envs")
        .join(digest.trim_start_matches("sha256:"))
}

/// The environment of the installed package whose folder is `package_dir`, when that folder
/// is `<state>/store/<hex>/<id>` (an installed version); `None` for any other folder (a project
/// or user root), whose tools run with the system's Python.
pub fn env_of_package(state: &Path, package_dir: &Path) -> Option<PathBuf> {
    let version = package_dir.parent()?;
    let hex = version.file_name()?.to_str()?;
    let digest = !hex.is_empty() && hex.chars().all(|c| c.is_ascii_hexdigit());
    (digest && version.parent()? == state.join("store") && package_dir.file_name().is_some())
        .then(|| env_dir(state, hex))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_store_folder_has_an_environment() {
        let state = Path::new("/home/me/.local/share/quiver");
        let cases: &[(&str, Option<&str>)] = &[
            (
                "/home/me/.local/share/quiver/store/ab12/weather",
                Some("/home/me/.local/share/quiver/envs/ab12"),
            ),
            ("/home/me/.local/share/quiver/store/ab12", None),
            ("/home/me/.local/share/quiver/store/not-hex/weather", None),
            ("/home/me/.local/share/quiver/packages/weather", None),
            ("/home/me/project/.quiver/packages/weather", None),
            ("/other/store/ab12/weather", None),
            ("/", None),
        ];
        for (dir, want) in cases {
            assert_eq!(
                env_of_package(state, Path::new(dir)),
                want.map(PathBuf::from),
                "{dir}"
            );
        }
        assert_eq!(
            env_dir(state, "sha256:ab12"),
            Path::new("/home/me/.local/share/quiver/envs/ab12")
        );
    }
}
