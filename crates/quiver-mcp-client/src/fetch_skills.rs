//! Fetching a server's skills over one session (the other module, beside `session.rs`, that
//! names rmcp types). Where the server declares the Skills extension, `skills/list` gives each
//! skill's files with digests and sizes, and every file read is checked against them (a skill
//! with a file that does not match is left out whole); otherwise the `skill://` resources of
//! `resources/list` are the skills (each `.../SKILL.md` a skill's root, each resource under
//! it one of its files, as the extension serves them to clients of older protocol revisions).

use base64::Engine as _;
use rmcp::Peer;
use rmcp::model::{ReadResourceRequestParams, ResourceContents, SkillResource, SkillResources};
use rmcp::service::RoleClient;

use crate::McpClientError;
use crate::skills::{
    MAX_REMOTE_SKILL_BYTES, MAX_REMOTE_SKILLS, MAX_SKILL_FILES, RemoteSkill, relative_path,
};
use quiver_package::source::MAX_SKILL_ASSET_BYTES;

/// A skill as listed: its root URI (ending in `/`), its name, and each file's URI with what
/// the listing promised of it (digest and size from `skills/list`, a size from
/// `resources/list`).
struct Listed {
    root: String,
    name: String,
    files: Vec<(String, Promise)>,
}

enum Promise {
    Manifest(SkillResource),
    Size(Option<u64>),
}

/// Every skill `peer` offers, with its files' bytes, within the bounds of [`crate::skills`].
/// A server that offers none (or no resources at all) has none.
pub(crate) async fn fetch(peer: &Peer<RoleClient>) -> Result<Vec<RemoteSkill>, McpClientError> {
    let info = peer.peer_info();
    let capabilities = info.as_ref().map(|i| &i.capabilities);
    let failed =
        |what: &str, e: rmcp::ServiceError| McpClientError::Failed(format!("`{what}` failed: {e}"));
    let mut listed = Vec::new();
    if capabilities.is_some_and(|c| c.supports_skills()) {
        for skill in peer
            .list_all_skills()
            .await
            .map_err(|e| failed("skills/list", e))?
        {
            if let Err(why) = skill.validate() {
                tracing::warn!(skill = %skill.uri, "skill left out: {why}");
                continue;
            }
            let SkillResources::Files(files) = &skill.resources else {
                tracing::warn!(skill = %skill.uri, "skill left out: its files are dynamic");
                continue;
            };
            listed.push(Listed {
                root: skill
                    .uri
                    .strip_suffix("SKILL.md")
                    .unwrap_or(&skill.uri)
                    .to_owned(),
                name: skill.name().to_owned(),
                files: files
                    .iter()
                    .map(|f| (f.uri.clone(), Promise::Manifest(f.clone())))
                    .collect(),
            });
        }
    } else if capabilities.is_some_and(|c| c.resources.is_some()) {
        let resources = peer
            .list_all_resources()
            .await
            .map_err(|e| failed("resources/list", e))?;
        let roots: Vec<&str> = resources
            .iter()
            .filter(|r| r.uri.starts_with("skill://") && r.uri.ends_with("/SKILL.md"))
            .filter_map(|r| r.uri.strip_suffix("SKILL.md"))
            .take(MAX_REMOTE_SKILLS)
            .collect();
        for root in &roots {
            let name = root.trim_end_matches('/').rsplit('/').next().unwrap_or("");
            let Some(name) = relative_path("", name) else {
                continue;
            };
            // A file belongs to the deepest skill root above it.
            let files = resources
                .iter()
                .filter(|r| {
                    roots
                        .iter()
                        .filter(|other| r.uri.starts_with(**other))
                        .max_by_key(|other| other.len())
                        == Some(root)
                })
                .map(|r| (r.uri.clone(), Promise::Size(r.size)))
                .collect();
            listed.push(Listed {
                root: (*root).to_owned(),
                name,
                files,
            });
        }
    }
    let mut out = Vec::new();
    let mut total = 0u64;
    for skill in listed.into_iter().take(MAX_REMOTE_SKILLS) {
        match read_skill(peer, skill, &mut total).await {
            Ok(Some(skill)) => out.push(skill),
            Ok(None) => {}
            Err(why) => tracing::warn!("skill left out: {why}"),
        }
    }
    Ok(out)
}

/// Reads the files of `skill`, `SKILL.md` first; `None` when it has no readable `SKILL.md`
/// or the bound on all files' bytes (`total` so far) is reached.
async fn read_skill(
    peer: &Peer<RoleClient>,
    mut skill: Listed,
    total: &mut u64,
) -> Result<Option<RemoteSkill>, String> {
    let skill_md = format!("{}SKILL.md", skill.root);
    skill.files.sort_by_key(|(uri, _)| *uri != skill_md);
    let mut files = Vec::new();
    for (uri, promise) in skill.files.into_iter().take(MAX_SKILL_FILES) {
        let Some(path) = relative_path(&skill.root, &uri) else {
            tracing::warn!(file = %uri, "skill file left out: not a plain path under its skill");
            continue;
        };
        let promised = match &promise {
            Promise::Manifest(m) => Some(m.size),
            Promise::Size(size) => *size,
        };
        if promised.is_some_and(|s| s > MAX_SKILL_ASSET_BYTES) {
            tracing::warn!(file = %uri, "skill file left out: larger than {MAX_SKILL_ASSET_BYTES} bytes");
            continue;
        }
        let read = peer
            .read_resource(ReadResourceRequestParams::new(uri.as_str()))
            .await
            .map_err(|e| format!("{uri}: `resources/read` failed: {e}"))?;
        let bytes = match read.contents.into_iter().next() {
            Some(ResourceContents::TextResourceContents { text, .. }) => text.into_bytes(),
            Some(ResourceContents::BlobResourceContents { blob, .. }) => {
                base64::engine::general_purpose::STANDARD
                    .decode(blob)
                    .map_err(|e| format!("{uri}: not base64: {e}"))?
            }
            _ => return Err(format!("{uri}: no text or blob content")),
        };
        if let Promise::Manifest(manifest) = &promise {
            manifest.verify(&bytes).map_err(|e| e.to_string())?;
        }
        if bytes.len() as u64 > MAX_SKILL_ASSET_BYTES {
            continue;
        }
        *total += bytes.len() as u64;
        if *total > MAX_REMOTE_SKILL_BYTES {
            tracing::warn!(
                "skills left out: more than {MAX_REMOTE_SKILL_BYTES} bytes of skill files"
            );
            return Ok(None);
        }
        files.push((path, bytes));
    }
    if files.first().is_none_or(|(path, _)| path != "SKILL.md") {
        return Err(format!("{}SKILL.md: not readable", skill.root));
    }
    Ok(Some(RemoteSkill {
        name: skill.name,
        files,
    }))
}
