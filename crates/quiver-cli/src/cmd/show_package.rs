//! What `quiver show <package>` says a package can do: its exposed and private items with
//! category, approval mode and risk, its permissions in words, its settings (set or unset,
//! never their values), its diagnostics, and, for an installed package, where it came from
//! (publisher, digest, signing keys, or unsigned).

use quiver_catalog::{Catalog, CatalogPackage};
use quiver_host::Config;
use serde_json::{Value, json};

/// The `can_do` part of `quiver show`'s JSON for the package `cp`.
pub fn can_do(catalog: &Catalog, cp: &CatalogPackage, config: &Config) -> Value {
    let p = &cp.package;
    let mut items: Vec<Value> = p
        .tools
        .iter()
        .map(|t| {
            json!({"kind": "tool", "name": t.name, "exposed": t.expose, "hidden": t.hidden,
                   "category": t.category, "approval": t.approval, "risk": t.risk,
                   "risk_category": t.risk_category})
        })
        .collect();
    items.extend(
        p.agents
            .iter()
            .map(|a| json!({"kind": "agent", "name": a.name, "exposed": a.expose})),
    );
    items.extend(
        p.workflows
            .iter()
            .map(|w| json!({"kind": "workflow", "name": w.name, "exposed": w.expose})),
    );
    let permissions: Vec<String> =
        quiver_policy::permissions::describe_permissions(&p.manifest.permissions)
            .iter()
            .map(ToString::to_string)
            .collect();
    let set = config.runtime.settings.get(p.id.as_str());
    let secret = p.manifest.secret_settings();
    let settings: Vec<Value> = p
        .manifest
        .config
        .as_ref()
        .and_then(|c| c.get("properties"))
        .and_then(Value::as_object)
        .map(|props| {
            props
                .keys()
                .map(|name| {
                    json!({"name": name, "secret": secret.contains(name),
                           "set": set.is_some_and(|s| s.contains_key(name))})
                })
                .collect()
        })
        .unwrap_or_default();
    let diagnostics: Vec<Value> = catalog
        .diagnostics()
        .iter()
        .filter(|d| d.file.starts_with(&p.root))
        .map(|d| json!({"severity": d.severity.to_string(), "code": d.code, "message": d.message, "file": d.file}))
        .collect();
    json!({"items": items, "permissions": permissions, "settings": settings,
           "diagnostics": diagnostics, "installed": installed(p)})
}

/// The installed record of the package whose folder is `p.root`, when it lies in the store.
pub(super) fn installed(p: &quiver_package::Package) -> Value {
    let Some(state) = quiver_host::paths::state_dir() else {
        return Value::Null;
    };
    let Ok(list) = quiver_install::store::Store::new(&state).installed() else {
        return Value::Null;
    };
    let store = quiver_install::store::Store::new(&state);
    list.packages
        .get(p.id.as_str())
        .map(|v| &v.current)
        .filter(|r| p.root.starts_with(store.folder(&r.digest)))
        .map(|r| json!(r))
        .unwrap_or(Value::Null)
}
