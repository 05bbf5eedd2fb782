//! The catalog through its public interface: scanning real folders, names, shadowing,
//! rendering under budgets, the collision lint and search.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::Path;

use quiver_catalog::lint::collisions;
use quiver_catalog::render::{available_skills_xml, markdown, package_list};
use quiver_catalog::{BuiltinTool, Catalog, CatalogOptions, EntryKind, Root, Scope};

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn tool(desc: &str, extra: &str) -> String {
    format!(
        "description: {desc}\ncategory: perception\nexpose: true\nrun: {{command: [python3, main.py]}}\n{extra}"
    )
}

fn fixture(root: &Path) {
    write(
        root,
        "weather/quiver.yaml",
        "id: weather\nname: 天气\ndescription: 天气预报与气温查询 Weather forecasts\n",
    );
    write(
        root,
        "weather/SKILL.md",
        "---\nname: weather\ndescription: How to answer weather questions.\n---\nbody\n",
    );
    write(
        root,
        "weather/tools/forecast/tool.yaml",
        &tool(
            "查询城市的天气预报和气温 Get the weather forecast for a city",
            "triggers: [天气, 气温, 温度]\ninput: {type: object, properties: {city: {type: string, description: 城市}}}\n",
        ),
    );
    write(
        root,
        "weather/tools/secret/tool.yaml",
        &tool("internal helper", "hidden: true\n"),
    );
    write(
        root,
        "weather/tools/private/tool.yaml",
        "description: private helper\ncategory: decision\nrun: {command: [a]}\n",
    );
    write(
        root,
        "weather/skills/cities/SKILL.md",
        "---\nname: cities\ndescription: City codes for forecasts.\n---\n",
    );
    write(
        root,
        "weather/skills/manual/SKILL.md",
        "---\nname: manual\ndescription: Only people start this.\ndisable-model-invocation: true\n---\n",
    );
    write(
        root,
        "weather/agents/reporter.md",
        "---\ndescription: Writes weather reports.\nexpose: true\n---\nYou write reports.\n",
    );
    write(
        root,
        "notes/quiver.yaml",
        "id: notes\ndescription: Take notes 记笔记\n",
    );
    write(
        root,
        "notes/tools/add_note/tool.yaml",
        &tool("Save a note 保存一条笔记", ""),
    );
    write(
        root,
        "calc/quiver.yaml",
        "id: calc\ndescription: Arithmetic 计算器\n",
    );
    write(
        root,
        "calc/tools/evaluate/tool.yaml",
        &tool("Evaluate an arithmetic expression 计算数学表达式", ""),
    );
}

#[test]
fn snapshot_names_and_visibility() {
    let tmp = tempfile::tempdir().unwrap();
    fixture(tmp.path());
    let catalog = Catalog::load_dirs(&[tmp.path()]);
    assert!(
        catalog.diagnostics().iter().all(|d| !d.is_error()),
        "{:#?}",
        catalog.diagnostics()
    );
    let item = catalog.item("weather.forecast").unwrap();
    assert_eq!(item.wire.as_deref(), Some("weather__forecast"));
    assert_eq!(
        catalog.item_by_wire("weather__forecast").unwrap().qualified,
        "weather.forecast"
    );
    // Hidden and private items exist and resolve, but are not in the model-facing view.
    assert!(catalog.item("weather.secret").is_some() && catalog.item("weather.private").is_some());
    let ids: Vec<&str> = catalog.entries().iter().map(|e| e.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "calc",
            "calc.evaluate",
            "notes",
            "notes.add_note",
            "weather",
            "weather.forecast",
            "weather.reporter",
            "weather",
            "weather/cities"
        ]
    );
    for q in [
        "internal helper",
        "private helper",
        "Only people start this",
    ] {
        let found = catalog.search(q, 5, &|_| true);
        assert!(
            found.iter().all(|f| !f.entry.id.contains("secret")
                && !f.entry.id.contains("private")
                && f.entry.id != "weather/manual"),
            "{q}"
        );
    }
}

#[test]
fn colloquial_chinese_finds_the_weather_tool_first() {
    let tmp = tempfile::tempdir().unwrap();
    fixture(tmp.path());
    let catalog = Catalog::load_dirs(&[tmp.path()]);
    let tools_only = |e: &quiver_catalog::Entry| e.kind == EntryKind::Tool;
    let found = catalog.search("北京明天多少度", 5, &tools_only);
    assert_eq!(found[0].entry.id, "weather.forecast", "{found:?}");
    // The caller's filter applies at query time.
    let found = catalog.search("北京明天多少度", 5, &|e| {
        e.id != "weather.forecast" && tools_only(e)
    });
    assert!(found.iter().all(|f| f.entry.id != "weather.forecast"));
    // Deterministic: the same query gives the same ranking.
    let a: Vec<_> = catalog
        .search("note", 5, &|_| true)
        .iter()
        .map(|f| f.entry.id.clone())
        .collect();
    let b: Vec<_> = catalog
        .search("note", 5, &|_| true)
        .iter()
        .map(|f| f.entry.id.clone())
        .collect();
    assert_eq!(a, b);
}

#[test]
fn builtins_are_searchable() {
    let tmp = tempfile::tempdir().unwrap();
    fixture(tmp.path());
    let options = CatalogOptions {
        builtins: vec![BuiltinTool {
            name: "read_skill".into(),
            description: "Open a skill and read its instructions.".into(),
        }],
        ..CatalogOptions::default()
    };
    let catalog = Catalog::load(
        &[Root {
            path: tmp.path().to_path_buf(),
            scope: Scope::Project,
        }],
        &options,
    );
    let found = catalog.search("read a skill's instructions", 3, &|_| true);
    assert_eq!(found[0].entry.id, "read_skill");
    assert_eq!(found[0].entry.kind, EntryKind::Builtin);
}

#[test]
fn wire_collisions_are_errors_naming_both_files() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "a/quiver.yaml", "id: a\n");
    write(tmp.path(), "a/tools/b__c/tool.yaml", &tool("one", ""));
    write(tmp.path(), "a__b/quiver.yaml", "id: a__b\n");
    write(tmp.path(), "a__b/tools/c/tool.yaml", &tool("two", ""));
    let catalog = Catalog::load_dirs(&[tmp.path()]);
    let d = catalog
        .diagnostics()
        .iter()
        .find(|d| d.code == "wire-name-collision")
        .unwrap();
    assert!(
        d.message.contains("a.b__c") && d.message.contains("a__b.c"),
        "{d:?}"
    );
    assert!(
        d.message.contains("tool.yaml") && d.file.ends_with("tool.yaml"),
        "{d:?}"
    );
    // The first keeps the wire name; the second is reachable only by qualified name.
    assert_eq!(catalog.item_by_wire("a__b__c").unwrap().qualified, "a.b__c");
    assert!(catalog.item("a__b.c").unwrap().wire.is_none());
}

#[test]
fn scope_precedence_and_shadowing() {
    let tmp = tempfile::tempdir().unwrap();
    for (dir, desc) in [
        ("user/weather", "user copy"),
        ("project/weather", "project copy"),
    ] {
        write(
            tmp.path(),
            &format!("{dir}/quiver.yaml"),
            &format!("id: weather\ndescription: {desc}\n"),
        );
        write(
            tmp.path(),
            &format!("{dir}/tools/forecast/tool.yaml"),
            &tool(desc, ""),
        );
    }
    let roots = [
        Root {
            path: tmp.path().join("user"),
            scope: Scope::User,
        },
        Root {
            path: tmp.path().join("project"),
            scope: Scope::Project,
        },
    ];
    // Without the operator's override, the project copy may not take the user one's id.
    let catalog = Catalog::load(&roots, &CatalogOptions::default());
    let p = catalog.package("weather").unwrap();
    assert_eq!(
        (p.package.description.as_str(), p.scope),
        ("user copy", Scope::User)
    );
    assert_eq!(catalog.packages().len(), 1);
    let refused: Vec<_> = catalog
        .diagnostics()
        .iter()
        .filter(|d| d.code == "package-shadowing-refused")
        .collect();
    assert_eq!(refused.len(), 1, "{:?}", catalog.diagnostics());
    assert!(refused[0].is_error() && refused[0].file.ends_with("project/weather"));
    assert!(catalog.item("project:weather.forecast").is_none());
    assert_eq!(
        catalog.item_by_wire("weather__forecast").unwrap().qualified,
        "weather.forecast"
    );
    // The override named, it shadows as the precedence says.
    let allowed = CatalogOptions {
        allow_shadow: vec!["weather".parse().unwrap()],
        ..CatalogOptions::default()
    };
    let catalog = Catalog::load(&roots, &allowed);
    assert_eq!(
        catalog.package("weather").unwrap().package.description,
        "project copy"
    );
    let d = catalog
        .diagnostics()
        .iter()
        .find(|d| d.code == "package-shadowed")
        .unwrap();
    assert!(d.message.contains("user:weather"), "{d:?}");
    let shadowed = catalog.item("user:weather.forecast").unwrap();
    assert!(shadowed.wire.is_none());
    assert_eq!(
        catalog.item_by_wire("weather__forecast").unwrap().qualified,
        "weather.forecast"
    );
    // Precedence is configurable.
    let options = CatalogOptions {
        precedence: vec![Scope::User, Scope::Project, Scope::Installed],
        ..allowed
    };
    let catalog = Catalog::load(&roots, &options);
    assert_eq!(
        catalog.package("weather").unwrap().package.description,
        "user copy"
    );
}

#[test]
fn a_cut_package_list_says_how_many_more_within_its_budget() {
    let tmp = tempfile::tempdir().unwrap();
    for i in 0..80 {
        write(
            tmp.path(),
            &format!("p{i:02}/quiver.yaml"),
            &format!("id: p{i:02}\ndescription: Package number {i} does things\n"),
        );
        write(
            tmp.path(),
            &format!("p{i:02}/tools/t/tool.yaml"),
            &tool(&format!("Tool {i} of the package"), ""),
        );
    }
    let catalog = Catalog::load_dirs(&[tmp.path()]);
    for budget in [0, 10, 40, 100, 1_000, 2_500, 100_000] {
        let list = package_list(&catalog, &|_| true, budget);
        assert!(
            list.text.chars().count() <= budget,
            "{budget}: {}",
            list.text
        );
        let shown = list.text.lines().filter(|l| l.starts_with("- p")).count();
        assert_eq!(shown + list.dropped.len(), 80, "{budget}");
        let more = format!("- {} more packages: use tool_search", list.dropped.len());
        match list.dropped.len() {
            0 => assert!(!list.text.contains("more package"), "{budget}"),
            _ if budget > more.len() => {
                assert!(
                    list.text.ends_with(&format!("{more}\n")),
                    "{budget}: {}",
                    list.text
                )
            }
            _ => {}
        }
    }
    let cut = package_list(&catalog, &|_| true, 2_500);
    assert!(!cut.dropped.is_empty() && cut.dropped.len() < 80);
}

#[test]
fn renderings_and_budgets() {
    let tmp = tempfile::tempdir().unwrap();
    fixture(tmp.path());
    let catalog = Catalog::load_dirs(&[tmp.path()]);
    let all = package_list(&catalog, &|_| true, 10_000);
    assert_eq!(
        all.text,
        "- calc: Arithmetic 计算器\n  - calc__evaluate: Evaluate an arithmetic expression 计算数学表达式\n\
         - notes: Take notes 记笔记\n  - notes__add_note: Save a note 保存一条笔记\n\
         - 天气 (weather): 天气预报与气温查询 Weather forecasts\n  - weather__forecast: 查询城市的天气预报和气温 Get the weather forecast for a city\n  - weather__reporter (agent): Writes weather reports.\n  - weather/cities (skill): City codes for forecasts.\n"
    );
    assert!(all.dropped.is_empty() && all.warning().is_none());
    for hidden in ["secret", "private", "manual"] {
        assert!(!all.text.contains(hidden));
    }
    let cut = package_list(&catalog, &|_| true, 120);
    assert_eq!(cut.dropped, ["notes", "weather"]);
    assert!(cut.text.starts_with("- calc:"));
    assert!(
        cut.text.ends_with("- 2 more packages: use tool_search\n"),
        "{}",
        cut.text
    );
    assert!(cut.text.chars().count() <= 120);
    assert!(cut.warning().unwrap().contains("notes, weather"));
    assert_eq!(
        package_list(&catalog, &|_| true, 120),
        cut,
        "truncation is deterministic"
    );

    let xml = available_skills_xml(&catalog, &|_| true, 10_000);
    assert_eq!(
        xml.text,
        "<available_skills>\n<skill>\n<name>\nweather\n</name>\n<description>\nHow to answer weather questions.\n</description>\n<location>\nweather/SKILL.md\n</location>\n</skill>\n<skill>\n<name>\ncities\n</name>\n<description>\nCity codes for forecasts.\n</description>\n<location>\nweather/cities/SKILL.md\n</location>\n</skill>\n</available_skills>"
    );
    assert!(
        !xml.text.contains(&tmp.path().display().to_string()),
        "never a host path"
    );
    let xml = available_skills_xml(&catalog, &|_| true, 200);
    assert_eq!(xml.dropped, ["weather/cities"]);

    let md = markdown(
        &catalog,
        &|e| {
            e.package
                .is_some_and(|p| catalog.packages()[p].package.id.as_str() == "calc")
        },
        10_000,
    );
    assert_eq!(
        md.text,
        "### `calc`\n\nArithmetic 计算器\n\n- tool `calc__evaluate`: Evaluate an arithmetic expression 计算数学表达式\n\n"
    );
}

#[test]
fn overlapping_items_are_flagged_unless_when_not_to_use_tells_them_apart() {
    let tmp = tempfile::tempdir().unwrap();
    let same = "Get the weather forecast and temperature for a city today or tomorrow";
    write(tmp.path(), "a/quiver.yaml", "id: a\n");
    write(
        tmp.path(),
        "a/tools/forecast/tool.yaml",
        &tool(same, "triggers: [weather, temperature]\n"),
    );
    write(tmp.path(), "b/quiver.yaml", "id: b\n");
    write(
        tmp.path(),
        "b/tools/outlook/tool.yaml",
        &tool(same, "triggers: [weather, temperature]\n"),
    );
    write(tmp.path(), "c/quiver.yaml", "id: c\n");
    write(
        tmp.path(),
        "c/tools/sum/tool.yaml",
        &tool("Add numbers together", ""),
    );
    let catalog = Catalog::load_dirs(&[tmp.path()]);
    let found = collisions(&catalog, 0.7);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(
        (found[0].items.as_slice(), found[0].resolved),
        (
            ["a.forecast".to_owned(), "b.outlook".to_owned()].as_slice(),
            false
        )
    );
    assert!(found[0].score >= 0.7);

    write(
        tmp.path(),
        "b/tools/outlook/tool.yaml",
        &format!(
            "description:\n  summary: {same}\n  when_not_to_use: for a plain forecast use a.forecast\ncategory: perception\nexpose: true\ntriggers: [weather, temperature]\nrun: {{command: [a]}}\n"
        ),
    );
    let catalog = Catalog::load_dirs(&[tmp.path()]);
    let found = collisions(&catalog, 0.7);
    assert!(found.iter().all(|c| c.resolved), "{found:?}");
}

/// Writes `count` near-identical exposed tools, 100 to a package.
fn near_identical_tools(root: &Path, count: usize) {
    for i in 0..count {
        let package = format!("p{:03}", i / 100);
        if i % 100 == 0 {
            write(
                root,
                &format!("{package}/quiver.yaml"),
                &format!("id: {package}\n"),
            );
        }
        write(
            root,
            &format!("{package}/tools/t{i:04}/tool.yaml"),
            &tool(
                &format!(
                    "Get the weather forecast and temperature for a city {}",
                    ["today", "tomorrow", "tonight"][i % 3]
                ),
                "triggers: [weather, temperature, forecast]\n",
            ),
        );
    }
}

#[test]
fn near_identical_tools_make_one_cluster_not_every_pair() {
    let tmp = tempfile::tempdir().unwrap();
    near_identical_tools(tmp.path(), 3000);
    write(tmp.path(), "zz/quiver.yaml", "id: zz\n");
    write(
        tmp.path(),
        "zz/tools/sum/tool.yaml",
        &tool("Add numbers together", ""),
    );
    let catalog = Catalog::load_dirs(&[tmp.path()]);
    let start = std::time::Instant::now();
    let found = collisions(&catalog, 0.7);
    let elapsed = start.elapsed();
    eprintln!("collision lint over 3,001 tools: {elapsed:?}");
    // Three clusters (one per closing word), none with the distinct tool.
    let sizes: Vec<usize> = found.iter().map(|c| c.items.len()).collect();
    assert_eq!(sizes, [1000, 1000, 1000]);
    assert!(
        found
            .iter()
            .flat_map(|c| &c.items)
            .all(|i| !i.starts_with("zz."))
    );
    let diags = quiver_catalog::lint::collision_diagnostics(&catalog, &found);
    assert_eq!(diags.len(), 3);
    assert!(
        diags[0]
            .message
            .starts_with("1000 items: `p000.t0000`, `p000.t0003`"),
        "{}",
        diags[0].message
    );
    assert!(
        diags[0].message.contains("and 990 more"),
        "{}",
        diags[0].message
    );
    // Linear in the tools: far below the seconds that 4.5 million pairs took.
    assert!(elapsed < std::time::Duration::from_secs(2), "{elapsed:?}");
}
