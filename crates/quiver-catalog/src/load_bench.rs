//! The load benchmark: generate many packages, then time scan + parse + index.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

use crate::catalog::{Catalog, CatalogOptions};
use crate::scan::{Root, Scope};

/// Packages per generated root (roots are limited to 2,000 folders each).
pub const PACKAGES_PER_ROOT: usize = 1000;

/// Figures of one load.
#[derive(Debug, Clone, Serialize)]
pub struct LoadReport {
    /// Packages loaded.
    pub packages: usize,
    /// Tools loaded.
    pub tools: usize,
    /// Error diagnostics (0 for generated packages).
    pub errors: usize,
    /// Time to generate the files (not part of the load).
    pub generate_ms: f64,
    /// Scan, parse and index, in milliseconds.
    pub load_ms: f64,
}

/// Writes `count` packages (a manifest, a skill and two tools each, with bilingual
/// descriptions) into roots under `dir`, and returns the roots.
pub fn generate(dir: &Path, count: usize) -> io::Result<Vec<Root>> {
    let mut roots = Vec::new();
    for i in 0..count {
        let root = dir.join(format!("root{:03}", i / PACKAGES_PER_ROOT));
        if i % PACKAGES_PER_ROOT == 0 {
            roots.push(Root {
                path: root.clone(),
                scope: Scope::Project,
            });
        }
        let id = format!("pkg{i:05}");
        let pkg = root.join(&id);
        fs::create_dir_all(pkg.join("tools/lookup"))?;
        fs::create_dir_all(pkg.join("tools/update"))?;
        fs::write(
            pkg.join("quiver.yaml"),
            format!(
                "id: {id}\nname: Package {i}\nversion: 1.0.{i}\ndescription: Records of kind {i} 第{i}类记录\npermissions: {{}}\n"
            ),
        )?;
        fs::write(
            pkg.join("SKILL.md"),
            format!(
                "---\nname: {id}\ndescription: How to work with records of kind {i}. 处理第{i}类记录。\n---\n\nInstructions.\n"
            ),
        )?;
        for (tool, category) in [("lookup", "perception"), ("update", "action")] {
            fs::write(
                pkg.join("tools").join(tool).join("tool.yaml"),
                format!(
                    "description:\n  summary: {tool} a record of kind {i} 查询或更新记录\n  when_to_use: The user asks about kind {i}.\ncategory: {category}\nexpose: true\ntriggers: [record {i}, 记录{i}]\ninput:\n  type: object\n  properties:\n    key: {{type: string, description: The record key 记录编号}}\n  required: [key]\nexamples:\n  - query: {tool} record {i}\n    arguments: {{key: \"{i}\"}}\nrun: {{command: [python3, main.py]}}\n"
                ),
            )?;
        }
    }
    Ok(roots)
}

/// Generates `count` packages in `dir` and loads them into a catalog.
pub fn run(dir: &Path, count: usize) -> io::Result<LoadReport> {
    let start = Instant::now();
    let roots = generate(dir, count)?;
    let generate_ms = start.elapsed().as_secs_f64() * 1e3;
    let start = Instant::now();
    let catalog = Catalog::load(&roots, &CatalogOptions::default());
    let load_ms = start.elapsed().as_secs_f64() * 1e3;
    Ok(LoadReport {
        packages: catalog.packages().len(),
        tools: catalog.items().len(),
        errors: catalog
            .diagnostics()
            .iter()
            .filter(|d| d.is_error())
            .count(),
        generate_ms,
        load_ms,
    })
}

/// A fresh folder for generated packages under the system temp folder.
pub fn temp_dir() -> PathBuf {
    std::env::temp_dir().join(format!("quiver-load-bench-{}", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_packages_load_cleanly() {
        let tmp = tempfile::tempdir().unwrap();
        let count: usize = std::env::var("QUIVER_LOAD_BENCH_N")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(1200);
        let report = run(tmp.path(), count).unwrap();
        eprintln!("{report:?}");
        assert_eq!(
            (report.packages, report.tools, report.errors),
            (count, 2 * count, 0)
        );
    }
}
