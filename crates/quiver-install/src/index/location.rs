//! Where an index is read from: a folder, or an HTTP(S) site laid out the same way. Every file
//! is read by its path relative to the index (checked by the archive path rules, so nothing
//! outside it is named), with a size limit.

use std::io::Read;
use std::path::{Path, PathBuf};

use quiver_package::distribution::paths::check_entry_path;

use crate::InstallError;

/// An index folder or site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexLocation {
    /// A folder.
    Folder(PathBuf),
    /// The base URL of a site (`http://127.0.0.1:8080/index`).
    Http(String),
}

impl IndexLocation {
    /// A URL starting with `http://` or `https://` is a site, anything else a folder.
    pub fn parse(text: &str) -> IndexLocation {
        if text.starts_with("http://") || text.starts_with("https://") {
            IndexLocation::Http(text.trim_end_matches('/').to_owned())
        } else {
            IndexLocation::Folder(PathBuf::from(text))
        }
    }

    /// The name the highest sequence seen is kept under.
    pub fn key(&self) -> String {
        match self {
            IndexLocation::Folder(dir) => std::fs::canonicalize(dir)
                .unwrap_or_else(|_| dir.clone())
                .display()
                .to_string(),
            IndexLocation::Http(url) => url.clone(),
        }
    }

    /// The bytes of `relative`, at most `limit`; `None` when the index has no such file.
    pub fn read(&self, relative: &str, limit: u64) -> Result<Option<Vec<u8>>, InstallError> {
        check_entry_path(relative).map_err(|problem| InstallError::EntryPath {
            path: relative.to_owned(),
            problem,
        })?;
        let mut bytes = Vec::new();
        match self {
            IndexLocation::Folder(dir) => {
                let path = dir.join(relative);
                let Ok(file) = std::fs::File::open(&path) else {
                    return Ok(None);
                };
                file.take(limit + 1)
                    .read_to_end(&mut bytes)
                    .map_err(crate::error::io(&path))?;
            }
            IndexLocation::Http(base) => {
                let _ = rustls::crypto::ring::default_provider().install_default();
                let url = format!("{base}/{relative}");
                let response = reqwest::blocking::get(&url)
                    .map_err(|e| InstallError::Refused(format!("cannot fetch `{url}`: {e}")))?;
                if response.status() == reqwest::StatusCode::NOT_FOUND {
                    return Ok(None);
                }
                if !response.status().is_success() {
                    return Err(InstallError::Refused(format!(
                        "`{url}` answered {}",
                        response.status()
                    )));
                }
                response.take(limit + 1).read_to_end(&mut bytes)?;
            }
        }
        if bytes.len() as u64 > limit {
            return Err(InstallError::Refused(format!(
                "`{relative}` is larger than {limit} bytes"
            )));
        }
        Ok(Some(bytes))
    }

    /// `relative` as a local file: the file itself in a folder, else downloaded into `scratch`.
    pub fn fetch_file(
        &self,
        relative: &str,
        limit: u64,
        scratch: &Path,
    ) -> Result<PathBuf, InstallError> {
        if let IndexLocation::Folder(dir) = self {
            check_entry_path(relative).map_err(|problem| InstallError::EntryPath {
                path: relative.to_owned(),
                problem,
            })?;
            return Ok(dir.join(relative));
        }
        let bytes = self
            .read(relative, limit)?
            .ok_or_else(|| InstallError::Refused(format!("the index has no `{relative}`")))?;
        let path = scratch.join("download.qpkg");
        std::fs::write(&path, bytes).map_err(crate::error::io(&path))?;
        Ok(path)
    }
}
