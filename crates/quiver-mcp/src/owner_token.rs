//! The owner's bearer token for `quiver serve --http`: made at the first start, kept in the
//! state folder as `mcp-token` (mode 0600), and standing for the local owner (the stdio
//! principal). Without it (or a configured token) an HTTP request is refused unless the
//! operator chose `--allow-anonymous`.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// The token file's name in the state folder.
pub const TOKEN_FILE: &str = "mcp-token";

/// The owner's token, and whether it was made now (so it is shown once).
#[derive(Debug)]
pub struct OwnerToken {
    /// The secret.
    pub token: String,
    /// Where it is kept.
    pub path: PathBuf,
    /// Made by this start.
    pub created: bool,
}

/// Reads the token from `state_dir`, or makes one (32 random bytes) and writes it 0600.
pub fn load_or_create(state_dir: &Path) -> std::io::Result<OwnerToken> {
    let path = state_dir.join(TOKEN_FILE);
    if let Ok(text) = std::fs::read_to_string(&path) {
        let token = text.trim();
        if token.len() >= 32 {
            return Ok(OwnerToken {
                token: token.to_owned(),
                path,
                created: false,
            });
        }
    }
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    let token = format!("qv_{}", URL_SAFE_NO_PAD.encode(bytes));
    std::fs::create_dir_all(state_dir)?;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(&path)?;
    #[cfg(unix)]
    file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
    file.write_all(format!("{token}\n").as_bytes())?;
    Ok(OwnerToken {
        token,
        path,
        created: true,
    })
}

/// The client configuration to paste (the `mcpServers` entry Claude Code, Cursor and the
/// SDKs read), for the server at `url`.
pub fn client_config(url: &str, token: &str) -> String {
    let entry = serde_json::json!({"mcpServers": {"quiver": {
        "type": "http",
        "url": url,
        "headers": {"Authorization": format!("Bearer {token}")},
    }}});
    serde_json::to_string_pretty(&entry).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_once_private_then_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let first = load_or_create(dir.path()).unwrap();
        assert!(first.created);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&first.path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let again = load_or_create(dir.path()).unwrap();
        assert!(!again.created);
        assert_eq!(again.token, first.token);
        assert!(client_config("http://127.0.0.1:1/mcp", &first.token).contains(&first.token));
    }
}
