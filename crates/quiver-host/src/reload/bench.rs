//! The save-to-swap benchmark (`quiver bench reload`): a host watching generated packages
//! (`quiver_catalog::load_bench::generate`: a manifest, a skill and two tools each); one
//! package's `quiver.yaml` is saved at a time, and the time from the save to the swap of a
//! catalog that holds the edit is measured. Saves are spaced so each is its own reload.

use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

use quiver_catalog::load_bench;
use serde::Serialize;

use super::watch::WatchOptions;
use crate::{Config, Host, HostError, HostOptions, State};

/// Figures for one number of packages.
#[derive(Debug, Clone, Serialize)]
pub struct SaveToSwap {
    /// Packages under the watched root.
    pub packages: usize,
    /// Saves measured.
    pub saves: usize,
    /// Median save-to-swap time, in milliseconds.
    pub p50_ms: f64,
    /// 95th percentile, in milliseconds.
    pub p95_ms: f64,
    /// Slowest, in milliseconds.
    pub max_ms: f64,
    /// Saves whose edit was never swapped in within 10 s.
    pub missed: usize,
}

/// Generates `packages` packages under `dir`, serves them with the reload watching (`polling`
/// forces the polling watcher), and times `saves` saves.
pub fn save_to_swap(
    dir: &Path,
    packages: usize,
    saves: usize,
    polling: bool,
) -> Result<SaveToSwap, HostError> {
    let io = |e: std::io::Error| HostError::Reload(format!("generating the packages: {e}"));
    let roots = load_bench::generate(&dir.join("packages"), packages).map_err(io)?;
    let state = dir.join("state");
    std::fs::create_dir_all(&state).map_err(io)?;
    let mut host = Host::open(
        Config::default(),
        HostOptions {
            roots: roots.iter().map(|r| r.path.clone()).collect(),
            state: State::in_dir(&state, None)?,
            search: None,
            approvers: Default::default(),
            launcher: vec!["/nonexistent/quiver".into(), "sandbox-exec".into()],
            reload: true,
        },
    )?;
    host.watch_roots(WatchOptions {
        force_polling: polling,
        ..WatchOptions::default()
    })?;
    let (tx, rx) = channel::<(Instant, Arc<quiver_catalog::Catalog>)>();
    let runtime = host.runtime().clone();
    host.on_catalog_swap(Arc::new(move |_| {
        let _ = tx.send((Instant::now(), runtime.catalog()));
    }));
    let mut times = Vec::with_capacity(saves);
    let mut missed = 0;
    for save in 0..saves {
        let i = (save * 7919) % packages.max(1);
        let id = format!("pkg{i:05}");
        let root = &roots[i / load_bench::PACKAGES_PER_ROOT].path;
        let description = format!("Edited {save} 第{save}次编辑");
        let manifest = format!(
            "id: {id}\nname: Package {i}\nversion: 1.0.{i}\ndescription: {description}\npermissions: {{}}\n"
        );
        // Anything swapped before this save is not its reload.
        while rx.try_recv().is_ok() {}
        let saved = Instant::now();
        std::fs::write(root.join(&id).join("quiver.yaml"), manifest).map_err(io)?;
        let deadline = saved + Duration::from_secs(10);
        let swapped = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok((at, catalog))
                    if catalog
                        .package(&id)
                        .is_some_and(|p| p.package.description == description) =>
                {
                    break Some(at);
                }
                Ok(_) => continue,
                Err(_) => break None,
            }
        };
        match swapped {
            Some(at) => times.push(at.duration_since(saved).as_secs_f64() * 1e3),
            None => missed += 1,
        }
        // Let the quiet window close before the next save.
        std::thread::sleep(Duration::from_millis(150));
    }
    times.sort_by(f64::total_cmp);
    let pick = |q: f64| {
        let at = ((times.len() as f64 * q).ceil() as usize).saturating_sub(1);
        times.get(at).copied().unwrap_or(f64::NAN)
    };
    Ok(SaveToSwap {
        packages,
        saves,
        p50_ms: pick(0.5),
        p95_ms: pick(0.95),
        max_ms: times.last().copied().unwrap_or(f64::NAN),
        missed,
    })
}
