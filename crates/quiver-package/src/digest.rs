//! `sha256:<hex>` digests of files and bytes: the form the MCP Skills extension serves for
//! `skill://` resources and the package manifest records for every file, computed in one place
//! so the two never disagree.

use std::fmt::Write as _;

use sha2::{Digest, Sha256};

/// `sha256:` and 64 lowercase hex digits of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    hex_digest(&Sha256::digest(bytes))
}

/// `sha256:` and the hex digest of everything `reader` yields, read in 64 KiB chunks (never
/// whole in memory), with the number of bytes read.
pub fn stream_digest(mut reader: impl std::io::Read) -> std::io::Result<(String, u64)> {
    let mut hasher = Sha256::new();
    let mut chunk = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = reader.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        total += n as u64;
        hasher.update(&chunk[..n]);
    }
    Ok((hex_digest(&hasher.finalize()), total))
}

/// `sha256:` and the lowercase hex of a finished hash.
pub fn hex_digest(hash: &[u8]) -> String {
    let mut out = String::with_capacity(7 + 2 * hash.len());
    out.push_str("sha256:");
    for b in hash {
        let _ = write!(out, "{b:02x}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streamed_and_whole_digests_agree() {
        let bytes: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let (streamed, size) = stream_digest(bytes.as_slice()).unwrap_or_default();
        assert_eq!(streamed, sha256_digest(&bytes));
        assert_eq!(size, 200_000);
        assert_eq!(
            sha256_digest(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
