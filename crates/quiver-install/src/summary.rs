//! What a person reads before saying yes to an install, the same for `quiver install` and the
//! console's authoring page: who publishes the package, where it comes from, its digest, what
//! it may do in words, its exposed and dangerous tools and its Python requirements. The lines
//! are plain text, not escaped: each front shows them its own way (control characters as
//! escapes on a terminal, invisible ones in a page).

use quiver_package::distribution::{index, signature};
use quiver_package::tool::Risk;

use crate::store::{Staged, Store};
use crate::trust::TrustStore;

/// The lines describing `staged`, headline first. `trust` names the fingerprints of the keys
/// that signed it.
pub fn describe(staged: &Staged, trust: Option<&TrustStore>) -> Vec<String> {
    let r = &staged.record;
    let p = &staged.package;
    let mut lines = vec![format!(
        "{}/{} {}: {}",
        r.publisher, r.id, r.version, p.description
    )];
    if r.unsigned {
        lines.push("UNSIGNED: nothing vouches for this package".to_owned());
    }
    for id in &r.signed_by {
        let fingerprint = trust
            .and_then(|t| t.keys.iter().find(|k| &k.key_id == id))
            .and_then(|k| signature::decode_public_key(&k.public_key).ok())
            .map(|k| signature::fingerprint(&k))
            .unwrap_or_default();
        lines.push(format!("signed by key {id} (fingerprint {fingerprint})"));
    }
    lines.push(format!("source: {}", r.source));
    lines.push(format!("digest: {}", r.digest));
    let words = quiver_policy::permissions::describe_permissions(&r.permissions.to_permissions());
    if words.is_empty() {
        lines.push("may: nothing beyond its own folder and data".to_owned());
    }
    lines.extend(words.iter().map(|w| format!("may: {w}")));
    let exposed: Vec<&str> = p
        .tools
        .iter()
        .filter(|t| t.expose)
        .map(|t| t.name.as_str())
        .collect();
    lines.push(format!("exposed tools: {}", list_or_none(&exposed)));
    let dangerous: Vec<&str> = p
        .tools
        .iter()
        .filter(|t| t.risk == Some(Risk::Dangerous) || t.risk_category.is_some())
        .map(|t| t.name.as_str())
        .collect();
    lines.push(format!("dangerous tools: {}", list_or_none(&dangerous)));
    if !p.requirements.is_empty() {
        let names: Vec<&str> = p
            .requirements
            .iter()
            .filter_map(|r| r.split_whitespace().next())
            .collect();
        lines.push(format!(
            "python requirements (installed now into its own environment): {}",
            list_or_none(&names)
        ));
    }
    lines
}

/// A warning for each installed package of another publisher whose id looks like the staged
/// one's (a typosquat, or an honest clash the person should notice).
pub fn confusable_warnings(store: &Store, staged: &Staged) -> Vec<String> {
    let r = &staged.record;
    let Ok(installed) = store.installed() else {
        return Vec::new();
    };
    installed
        .packages
        .values()
        .map(|v| &v.current)
        .filter(|other| other.publisher != r.publisher && index::confusable(&other.id, &r.id))
        .map(|other| {
            format!(
                "warning: `{}/{}` looks like the installed `{}/{}` of another publisher; check that it is the one you meant",
                r.publisher, r.id, other.publisher, other.id
            )
        })
        .collect()
}

fn list_or_none(items: &[&str]) -> String {
    if items.is_empty() {
        "none".to_owned()
    } else {
        items.join(", ")
    }
}
