//! What the model tests share: the pinned wheels, the reference fixtures, the cosine.

use std::path::Path;

use serde::de::DeserializeOwned;

mod wheel;

pub use wheel::pinned_wheel;

/// The reference fixture `tests/fixtures/<file>`, written once by a `scripts/*-reference.py`.
pub fn fixture<T: DeserializeOwned>(file: &str) -> T {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(file);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The cosine of two vectors (not assumed to be normalized).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (na * nb)
}
