//! What an update changes in a package's permissions, dimension by dimension; any addition is
//! an escalation the user must accept explicitly.

use serde::Serialize;

use super::manifest::PackPermissions;

/// The change in one dimension (`network`, `read`, `write`, `shell`, `env`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PermissionChange {
    /// The dimension.
    pub dimension: &'static str,
    /// What the new version may do that the old one could not.
    pub added: Vec<String>,
    /// What the new version no longer asks for.
    pub removed: Vec<String>,
}

/// Every dimension that differs between `old` and `new`.
pub fn diff(old: &PackPermissions, new: &PackPermissions) -> Vec<PermissionChange> {
    let shell = |p: &PackPermissions| {
        if p.shell {
            vec!["shell".to_owned()]
        } else {
            vec![]
        }
    };
    let dims: [(&'static str, Vec<String>, Vec<String>); 5] = [
        ("network", old.network.clone(), new.network.clone()),
        ("read", old.read.clone(), new.read.clone()),
        ("write", old.write.clone(), new.write.clone()),
        ("shell", shell(old), shell(new)),
        ("env", old.env.clone(), new.env.clone()),
    ];
    dims.into_iter()
        .filter_map(|(dimension, old, new)| {
            let added: Vec<String> = new.iter().filter(|x| !old.contains(x)).cloned().collect();
            let removed: Vec<String> = old.iter().filter(|x| !new.contains(x)).cloned().collect();
            (!added.is_empty() || !removed.is_empty()).then_some(PermissionChange {
                dimension,
                added,
                removed,
            })
        })
        .collect()
}

/// Whether any change adds something (an escalation).
pub fn escalates(changes: &[PermissionChange]) -> bool {
    changes.iter().any(|c| !c.added.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn perms(f: impl FnOnce(&mut PackPermissions)) -> PackPermissions {
        let mut p = PackPermissions {
            network: vec!["a.com".into()],
            read: vec!["/data".into()],
            write: vec!["/tmp/out".into()],
            shell: false,
            env: vec!["LANG".into()],
        };
        f(&mut p);
        p
    }

    #[test]
    fn each_dimension_reports_its_additions_and_removals() {
        let old = perms(|_| {});
        let cases: Vec<(PackPermissions, &str, Vec<&str>, Vec<&str>)> = vec![
            (
                perms(|p| p.network.push("b.com".into())),
                "network",
                vec!["b.com"],
                vec![],
            ),
            (
                perms(|p| p.read = vec!["/".into()]),
                "read",
                vec!["/"],
                vec!["/data"],
            ),
            (
                perms(|p| p.write.clear()),
                "write",
                vec![],
                vec!["/tmp/out"],
            ),
            (perms(|p| p.shell = true), "shell", vec!["shell"], vec![]),
            (
                perms(|p| p.env.push("TOKEN".into())),
                "env",
                vec!["TOKEN"],
                vec![],
            ),
        ];
        for (new, dimension, added, removed) in cases {
            let changes = diff(&old, &new);
            assert_eq!(changes.len(), 1, "{dimension}");
            assert_eq!(changes[0].dimension, dimension);
            assert_eq!(changes[0].added, added, "{dimension}");
            assert_eq!(changes[0].removed, removed, "{dimension}");
            assert_eq!(escalates(&changes), !added.is_empty(), "{dimension}");
        }
        assert!(diff(&old, &old).is_empty());
        assert!(!escalates(&diff(&perms(|p| p.shell = true), &old)));
    }
}
