//! Presence: which tools a turn offers the model, and which names a direct call may load
//! (DESIGN.md §3 "Presence" and "What a direct call may load").
//!
//! Offered every turn: the meta-tools (elsewhere), admitted tools that declare `platforms`
//! (resident once admitted), up to [`MAX_ALWAYS_LOADED`] `always_loaded` tools in catalog order
//! plus the operator's list, the exposed items of opened (pinned) packages, and the session's
//! loaded tools. Everything is filtered by this turn's admission.

use std::collections::BTreeSet;

use quiver_catalog::{Catalog, Item, ItemKind};
use quiver_package::tool::ToolScope;

/// Most `always_loaded` tools offered from packages' own declarations.
pub const MAX_ALWAYS_LOADED: usize = 8;

/// The session state presence depends on.
#[derive(Debug, Clone, Default)]
pub struct SessionView {
    /// Package ids opened in this session (their exposed items are pinned).
    pub opened: BTreeSet<String>,
    /// Loaded tools, qualified names, most recently used first.
    pub loaded: Vec<String>,
    /// Active skill ids.
    pub active_skills: BTreeSet<String>,
    /// What the active skills unlock (their `tools:`, or all of their own tools without one),
    /// as qualified names: their own tools become callable and offered, and the package's
    /// exposed items they name are offered.
    pub unlocked: BTreeSet<String>,
    /// The agent this session runs, as `(package, agent)`, when it is a package's own agent.
    pub agent: Option<(String, String)>,
    /// For a package's agent, the items its `tools:` declares (qualified names): it may call
    /// those, its own agent-scoped tools and what a skill it read unlocks, nothing else.
    /// `None` for any other caller.
    pub declared: Option<BTreeSet<String>>,
}

/// The operator's `always_loaded` list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum OperatorAlwaysLoaded {
    /// Only the packages' own declarations.
    #[default]
    None,
    /// These qualified names in addition to the packages' declarations.
    Extend(Vec<String>),
    /// These qualified names instead of the packages' declarations.
    Replace(Vec<String>),
}

/// The `always_loaded` tools of a catalog: at most 8 declared ones in catalog order (package
/// id, then tool name), never private, hidden or skill- and agent-scoped; the overflow is
/// returned so the caller can log it once per catalog. The operator's list does not count
/// toward the 8.
pub fn always_loaded(
    catalog: &Catalog,
    operator: &OperatorAlwaysLoaded,
) -> (Vec<usize>, Vec<String>) {
    let declared: Vec<usize> = if matches!(operator, OperatorAlwaysLoaded::Replace(_)) {
        Vec::new()
    } else {
        let mut declared: Vec<usize> = catalog
            .items()
            .iter()
            .enumerate()
            .filter(|(_, item)| {
                item.exposed
                    && !item.hidden
                    && item.wire.is_some()
                    && catalog
                        .tool(item)
                        .is_some_and(|t| t.always_loaded && t.scope == ToolScope::Package)
            })
            .map(|(i, _)| i)
            .collect();
        declared.sort_by(|&a, &b| {
            let (a, b) = (&catalog.items()[a], &catalog.items()[b]);
            let pa = catalog.packages()[a.package].package.id.as_str();
            let pb = catalog.packages()[b.package].package.id.as_str();
            (pa, a.name.as_str()).cmp(&(pb, b.name.as_str()))
        });
        declared
    };
    let overflow = declared
        .iter()
        .skip(MAX_ALWAYS_LOADED)
        .map(|&i| catalog.items()[i].qualified.clone())
        .collect();
    let mut out: Vec<usize> = declared.into_iter().take(MAX_ALWAYS_LOADED).collect();
    if let OperatorAlwaysLoaded::Extend(names) | OperatorAlwaysLoaded::Replace(names) = operator {
        for name in names {
            if let Ok(index) = operator_entry(catalog, name)
                && !out.contains(&index)
            {
                out.push(index);
            }
        }
    }
    (out, overflow)
}

/// The operator's `always_loaded` entries that are left out, each with why: a name no tool
/// has, or a tool no caller may be offered unasked (private, hidden, or scoped to a skill or
/// an agent). Shown to the operator at start.
pub fn operator_always_loaded_problems(
    catalog: &Catalog,
    operator: &OperatorAlwaysLoaded,
) -> Vec<String> {
    let (OperatorAlwaysLoaded::Extend(names) | OperatorAlwaysLoaded::Replace(names)) = operator
    else {
        return Vec::new();
    };
    names
        .iter()
        .filter_map(|name| {
            operator_entry(catalog, name)
                .err()
                .map(|why| format!("warning: `always_loaded` entry `{name}` {why}; it is left out"))
        })
        .collect()
}

/// The item an operator's `always_loaded` entry names, or why it cannot be offered unasked.
fn operator_entry(catalog: &Catalog, name: &str) -> Result<usize, &'static str> {
    let index = catalog.item_index(name).ok_or("names no item")?;
    let item = &catalog.items()[index];
    let tool = catalog.tool(item).ok_or("is not a tool")?;
    if item.hidden {
        return Err("is a hidden tool (callable by its exact name only)");
    }
    if tool.scope != ToolScope::Package {
        return Err(
            "is a skill's or an agent's own tool (offered once that skill is read or to that agent)",
        );
    }
    if !item.exposed {
        return Err("is a private tool (it answers only its package's own agents and workflows)");
    }
    Ok(index)
}

/// Whether `item` belongs to the agent this session runs (its own package).
fn is_own(catalog: &Catalog, view: &SessionView, item: &Item) -> bool {
    view.agent
        .as_ref()
        .is_some_and(|(package, _)| catalog.packages()[item.package].package.id.as_str() == package)
}

/// Whether the item is in scope for this session at all: skill-scoped tools need their skill
/// active, agent-scoped tools need that agent's session.
fn scope_open(catalog: &Catalog, view: &SessionView, item: &Item) -> bool {
    let Some(tool) = catalog.tool(item) else {
        return true;
    };
    match &tool.scope {
        ToolScope::Package => true,
        ToolScope::Skill(skill) => {
            view.active_skills.contains(skill) && view.unlocked.contains(&item.qualified)
        }
        ToolScope::Agent(agent) => view.agent.as_ref().is_some_and(|(package, a)| {
            a == agent && catalog.packages()[item.package].package.id.as_str() == package
        }),
    }
}

/// Whether `item` is one the catalog shows to callers outside its package: exposed, not
/// hidden, and not a skill's or an agent's own tool (those are offered only once their skill
/// is read, or to their agent). The package catalog, `read_skill`'s list of a package's tools,
/// `tool_search` and pinning list only these.
pub fn public(catalog: &Catalog, item: &Item) -> bool {
    item.exposed
        && !item.hidden
        && catalog
            .tool(item)
            .is_none_or(|t| t.scope == ToolScope::Package)
}

/// Whether a package's agent may use `item` at all: one its `tools:` declares, one of its own
/// agent-scoped tools, or one a skill it read unlocks. Any other caller may (`declared` is
/// `None`).
fn declared_by_agent(catalog: &Catalog, view: &SessionView, item: &Item) -> bool {
    view.declared.as_ref().is_none_or(|declared| {
        declared.contains(&item.qualified)
            || view.unlocked.contains(&item.qualified)
            || catalog
                .tool(item)
                .is_some_and(|t| matches!(t.scope, ToolScope::Agent(_)))
    })
}

/// Whether the caller may call `item` (admission aside): it is in scope (a skill's tools once
/// the skill is active, an agent's own tools in that agent's session), exposed or of the
/// caller's own package (a private item answers only its own package's agents and workflow
/// steps), and, for a package's agent, among what it declares. This is "what this caller may
/// call": the offer ([`offered`]) lists nothing outside it, and a call of anything outside it
/// is refused or unknown.
pub fn callable(catalog: &Catalog, view: &SessionView, item: &Item) -> bool {
    let scoped = catalog
        .tool(item)
        .is_some_and(|t| t.scope != ToolScope::Package);
    scope_open(catalog, view, item)
        && (item.exposed || scoped || is_own(catalog, view, item))
        && declared_by_agent(catalog, view, item)
}

/// Resolves a wire name for a direct call (DESIGN.md §3 steps 1–2): the item's index when
/// the caller may name it — an admitted exposed item, a root tool of an opened package, a tool
/// unlocked by an active skill, a hidden tool by its exact name, or anything of the session's
/// own package; for a package's agent, only among what it declares — and `None` for "unknown
/// tool", with no hint that it exists. Whether a private item may then run is the policy's
/// decision (a private root tool of an opened package is named, and refused).
pub fn reach(
    catalog: &Catalog,
    view: &SessionView,
    wire: &str,
    admitted: &dyn Fn(&Item) -> bool,
) -> Option<usize> {
    let index = catalog.item_index_by_wire(wire)?;
    let item = &catalog.items()[index];
    if !admitted(item)
        || !scope_open(catalog, view, item)
        || !declared_by_agent(catalog, view, item)
    {
        return None;
    }
    let package = catalog.packages()[item.package].package.id.as_str();
    let scoped = catalog
        .tool(item)
        .is_some_and(|t| t.scope != ToolScope::Package);
    let root_tool_of_opened =
        item.kind == ItemKind::Tool && !scoped && view.opened.contains(package);
    let nameable =
        item.exposed || item.hidden || root_tool_of_opened || scoped || is_own(catalog, view, item);
    nameable.then_some(index)
}

/// Whether `item` is resident because of what it is or what the session opened: an exposed
/// tool that declares `platforms`, an exposed item of an opened package, or a tool unlocked by
/// an active skill or belonging to the session's agent.
fn resident(catalog: &Catalog, view: &SessionView, item: &Item) -> bool {
    let public = public(catalog, item);
    let platform_tool = public && catalog.tool(item).is_some_and(|t| t.platforms.is_some());
    let package = catalog.packages()[item.package].package.id.as_str();
    // An opened package, or one loaded as a whole (seed 000: its exposed items come together).
    let pinned =
        public && (view.opened.contains(package) || view.loaded.iter().any(|l| l == package));
    let own_agent_tool = catalog
        .tool(item)
        .is_some_and(|t| matches!(t.scope, ToolScope::Agent(_)));
    let unlocked =
        view.unlocked.contains(&item.qualified) && (public || item.kind == ItemKind::Tool);
    platform_tool || pinned || own_agent_tool || unlocked
}

/// The items offered this turn (besides the meta-tools), in a stable order without duplicates:
/// what is present (resident, always loaded, loaded) among what the caller may call
/// ([`callable`]) and is admitted to.
pub fn offered(
    catalog: &Catalog,
    view: &SessionView,
    always: &[usize],
    admitted: &dyn Fn(&Item) -> bool,
) -> Vec<usize> {
    let mut out: Vec<usize> = Vec::new();
    let push = |i: usize, out: &mut Vec<usize>| {
        if !out.contains(&i) {
            out.push(i);
        }
    };
    let items = catalog.items();
    for (i, item) in items.iter().enumerate() {
        // Residence first: it is a few set lookups, while admission evaluates the item's
        // restrictions, and most items of a large catalog are not resident.
        if item.wire.is_some()
            && resident(catalog, view, item)
            && callable(catalog, view, item)
            && admitted(item)
        {
            push(i, &mut out);
        }
    }
    for &i in always {
        if callable(catalog, view, &items[i]) && admitted(&items[i]) {
            push(i, &mut out);
        }
    }
    for name in &view.loaded {
        if let Some(i) = catalog.item_index(name)
            && callable(catalog, view, &items[i])
            && admitted(&items[i])
        {
            push(i, &mut out);
        }
    }
    out
}

/// The name that holds `item`'s place among a session's loaded slots: its package's id for an
/// exposed item (seed 000: a package's exposed items come only together, so loading one loads
/// them all and the slots count packages), else its own qualified name (a hidden tool named
/// exactly, a skill's or a private tool).
pub fn slot<'c>(catalog: &'c Catalog, item: &'c Item) -> &'c str {
    let whole_package = item.exposed
        && !item.hidden
        && catalog
            .tool(item)
            .is_none_or(|t| t.scope == ToolScope::Package);
    if whole_package {
        catalog.packages()[item.package].package.id.as_str()
    } else {
        item.qualified.as_str()
    }
}

/// Whether item `index` is among [`offered`], without listing the others.
pub fn is_offered(
    catalog: &Catalog,
    view: &SessionView,
    always: &[usize],
    index: usize,
    admitted: &dyn Fn(&Item) -> bool,
) -> bool {
    let item = &catalog.items()[index];
    if !callable(catalog, view, item) || !admitted(item) {
        return false;
    }
    (item.wire.is_some() && resident(catalog, view, item))
        || always.contains(&index)
        || view.loaded.contains(&item.qualified)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::path::Path;

    fn write(root: &Path, rel: &str, text: &str) {
        let path = root.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    fn tool(extra: &str) -> String {
        format!("description: d\ncategory: perception\nrun: {{command: [a]}}\n{extra}")
    }

    fn catalog() -> (tempfile::TempDir, Catalog) {
        let tmp = tempfile::tempdir().unwrap();
        let r = tmp.path();
        write(r, "p/quiver.yaml", "id: p\n");
        write(r, "p/tools/open/tool.yaml", &tool("expose: true\n"));
        write(r, "p/tools/private/tool.yaml", &tool(""));
        write(r, "p/tools/secret/tool.yaml", &tool("hidden: true\n"));
        write(
            r,
            "p/tools/qq_only/tool.yaml",
            &tool("expose: true\nplatforms: [qq]\n"),
        );
        write(
            r,
            "p/skills/deep/SKILL.md",
            "---\nname: deep\ndescription: d\n---\n",
        );
        write(r, "p/skills/deep/tools/deep_tool/tool.yaml", &tool(""));
        write(r, "p/agents/helper/agent.yaml", "description: d\n");
        write(r, "p/agents/helper/system.md", "You help.\n");
        write(r, "p/agents/helper/tools/agent_tool/tool.yaml", &tool(""));
        for i in 0..10 {
            write(r, &format!("a{i}/quiver.yaml"), &format!("id: a{i}\n"));
            write(
                r,
                &format!("a{i}/tools/t/tool.yaml"),
                &tool("expose: true\nalways_loaded: true\n"),
            );
        }
        let catalog = Catalog::load_dirs(&[r]);
        assert!(
            catalog.diagnostics().iter().all(|d| !d.is_error()),
            "{:?}",
            catalog.diagnostics()
        );
        (tmp, catalog)
    }

    fn all(_: &Item) -> bool {
        true
    }

    #[test]
    fn direct_calls_reach_only_what_may_be_loaded() {
        let (_tmp, catalog) = catalog();
        let mut view = SessionView::default();
        let name = |r: Option<usize>| {
            r.map_or("unknown".to_owned(), |i| {
                catalog.items()[i].qualified.clone()
            })
        };
        let closed = [
            ("p__open", "p.open"),
            ("p__private", "unknown"),
            ("p__secret", "p.secret"),
            ("p__deep_tool", "unknown"),
            ("p__agent_tool", "unknown"),
            ("p__nothing", "unknown"),
        ];
        for (wire, want) in closed {
            assert_eq!(name(reach(&catalog, &view, wire, &all)), want, "{wire}");
        }
        // Not admitted this turn: unknown, with no hint.
        assert_eq!(reach(&catalog, &view, "p__open", &|_| false), None);
        // Opening the package makes its private root tools nameable (the policy refuses them).
        view.opened.insert("p".into());
        assert_eq!(
            name(reach(&catalog, &view, "p__private", &all)),
            "p.private"
        );
        // An active skill unlocks the tools it names (all of its own without `tools:`).
        view.active_skills.insert("p/deep".into());
        assert_eq!(
            name(reach(&catalog, &view, "p__deep_tool", &all)),
            "unknown"
        );
        view.unlocked.insert("p.deep_tool".into());
        assert_eq!(
            name(reach(&catalog, &view, "p__deep_tool", &all)),
            "p.deep_tool"
        );
        // Agent tools only in that agent's session.
        assert_eq!(
            name(reach(&catalog, &view, "p__agent_tool", &all)),
            "unknown"
        );
        view.agent = Some(("p".into(), "helper".into()));
        assert_eq!(
            name(reach(&catalog, &view, "p__agent_tool", &all)),
            "p.agent_tool"
        );
    }

    /// What a caller may call, for each kind of caller and item: the offer and the call's
    /// reach both take from it (issue 22 item 2).
    #[test]
    fn callable_by_each_kind_of_caller() {
        let (_tmp, catalog) = catalog();
        let declared = |names: &[&str]| Some(names.iter().map(|n| (*n).to_owned()).collect());
        let model = SessionView::default();
        let skill_read = SessionView {
            active_skills: ["p/deep".to_owned()].into(),
            unlocked: ["p.deep_tool".to_owned()].into(),
            ..SessionView::default()
        };
        let helper = |names: &[&str]| SessionView {
            agent: Some(("p".into(), "helper".into())),
            declared: declared(names),
            ..SessionView::default()
        };
        let other_agent = SessionView {
            agent: Some(("a0".into(), "x".into())),
            declared: declared(&["p.open", "p.private"]),
            ..SessionView::default()
        };
        let step = SessionView {
            agent: Some(("p".into(), String::new())),
            ..SessionView::default()
        };
        let cases: [(&str, &SessionView, &str, bool); 16] = [
            ("model", &model, "p.open", true),
            ("model", &model, "p.private", false),
            ("model", &model, "p.deep_tool", false),
            ("model", &model, "p.agent_tool", false),
            ("model, skill read", &skill_read, "p.deep_tool", true),
            ("helper, nothing declared", &helper(&[]), "p.open", false),
            (
                "helper, nothing declared",
                &helper(&[]),
                "p.agent_tool",
                true,
            ),
            ("helper", &helper(&["p.private"]), "p.private", true),
            ("helper", &helper(&["p.private"]), "p.open", false),
            ("helper", &helper(&["a1.t"]), "a1.t", true),
            ("another package's agent", &other_agent, "p.open", true),
            ("another package's agent", &other_agent, "p.private", false),
            (
                "another package's agent",
                &other_agent,
                "p.agent_tool",
                false,
            ),
            ("workflow step of p", &step, "p.private", true),
            ("workflow step of p", &step, "p.agent_tool", false),
            ("workflow step of p", &step, "a1.t", true),
        ];
        for (who, view, name, want) in cases {
            let item = catalog.item(name).unwrap();
            assert_eq!(callable(&catalog, view, item), want, "{who}: {name}");
            // Nothing outside it is ever offered.
            let index = catalog.item_index(name).unwrap();
            if !want {
                assert!(
                    !is_offered(&catalog, view, &[index], index, &all),
                    "{who}: {name}"
                );
            }
        }
    }

    #[test]
    fn always_loaded_is_capped_in_catalog_order() {
        let (_tmp, catalog) = catalog();
        let (always, overflow) = always_loaded(&catalog, &OperatorAlwaysLoaded::None);
        let names: Vec<&str> = always
            .iter()
            .map(|&i| catalog.items()[i].qualified.as_str())
            .collect();
        assert_eq!(
            names,
            [
                "a0.t", "a1.t", "a2.t", "a3.t", "a4.t", "a5.t", "a6.t", "a7.t"
            ]
        );
        assert_eq!(overflow, ["a8.t", "a9.t"]);
        let (always, _) = always_loaded(
            &catalog,
            &OperatorAlwaysLoaded::Extend(vec!["p.open".into()]),
        );
        assert_eq!(
            always.len(),
            9,
            "the operator's list does not count toward 8"
        );
        let (always, overflow) = always_loaded(
            &catalog,
            &OperatorAlwaysLoaded::Replace(vec!["p.open".into()]),
        );
        assert_eq!((always.len(), overflow.len()), (1, 0));
    }

    #[test]
    fn the_operators_always_loaded_refuses_what_no_caller_may_be_offered() {
        let (_tmp, catalog) = catalog();
        let cases = [
            ("p.open", None),
            ("p.private", Some("private")),
            ("p.secret", Some("hidden")),
            ("p.deep_tool", Some("skill's or an agent's own")),
            ("p.agent_tool", Some("skill's or an agent's own")),
            ("p.nothing", Some("names no item")),
        ];
        for (name, problem) in cases {
            let operator = OperatorAlwaysLoaded::Replace(vec![name.into()]);
            let (always, _) = always_loaded(&catalog, &operator);
            let problems = operator_always_loaded_problems(&catalog, &operator);
            match problem {
                None => {
                    assert_eq!(always.len(), 1, "{name}");
                    assert!(problems.is_empty(), "{name}: {problems:?}");
                }
                Some(why) => {
                    assert!(always.is_empty(), "{name}");
                    assert_eq!(problems.len(), 1, "{name}");
                    assert!(
                        problems[0].contains(name) && problems[0].contains(why),
                        "{problems:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn offered_tools() {
        let (_tmp, catalog) = catalog();
        let mut view = SessionView::default();
        let names = |v: &SessionView, admitted: &dyn Fn(&Item) -> bool| -> Vec<String> {
            offered(&catalog, v, &[], admitted)
                .iter()
                .map(|&i| catalog.items()[i].qualified.clone())
                .collect()
        };
        // Platform tools are resident once admitted.
        assert_eq!(names(&view, &all), ["p.qq_only"]);
        assert!(names(&view, &|i| i.name != "qq_only").is_empty());
        view.opened.insert("p".into());
        view.loaded.push("a3.t".into());
        assert_eq!(names(&view, &all), ["p.open", "p.qq_only", "a3.t"]);
        view.active_skills.insert("p/deep".into());
        assert!(!names(&view, &all).contains(&"p.deep_tool".to_owned()));
        view.unlocked.insert("p.deep_tool".into());
        assert!(names(&view, &all).contains(&"p.deep_tool".to_owned()));
        // `is_offered` agrees with `offered` on every item.
        let (always, _) = always_loaded(&catalog, &OperatorAlwaysLoaded::None);
        let listed = offered(&catalog, &view, &always, &all);
        for i in 0..catalog.items().len() {
            assert_eq!(
                is_offered(&catalog, &view, &always, i, &all),
                listed.contains(&i),
                "{}",
                catalog.items()[i].qualified
            );
        }
    }
}
