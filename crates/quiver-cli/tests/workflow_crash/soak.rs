//! The soak of `workflow_crash`: many runs while an outside `kill -9` hits the processes
//! driving them.

use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;

use super::{Env, Window, check};

/// A small xorshift generator: the soak's kill times, seeded by the clock (printed).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// The soak: `QUIVER_SOAK_RUNS` runs (default 200) of `crashy.flow`, four `quiver run`
/// processes at a time, while an outside `kill -9` hits one of them every 0.2–2 s, 20 times
/// (`QUIVER_SOAK_KILLS`); each killed run is restarted, then every run is checked as above.
/// About a minute in a debug build:
/// `cargo test -p quiver-cli --test workflow_crash -- --ignored soak`.
#[test]
#[ignore = "a soak of a few minutes; run it with --ignored"]
fn soak_outside_kill_9_during_many_runs() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    let count = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let (runs, kills) = (
        count("QUIVER_SOAK_RUNS", 200),
        count("QUIVER_SOAK_KILLS", 20),
    );
    let env = Arc::new(Env::new());
    let next = Arc::new(AtomicUsize::new(0));
    let slots: Arc<Vec<Mutex<Option<std::process::Child>>>> =
        Arc::new((0..4).map(|_| Mutex::new(None)).collect());
    let killed = Arc::new(Mutex::new(Vec::new()));
    let workers: Vec<_> = (0..slots.len())
        .map(|slot| {
            let (env, next, slots, killed) =
                (env.clone(), next.clone(), slots.clone(), killed.clone());
            std::thread::spawn(move || {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= runs {
                        return;
                    }
                    let key = format!("soak-{i}");
                    let child = env
                        .command(&["run", "crashy.flow", "--key", &key, "--wait", "--json"])
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .spawn()
                        .unwrap();
                    *slots[slot].lock().unwrap() = Some(child);
                    let began = std::time::Instant::now();
                    let mut stuck = false;
                    let status = loop {
                        let mut held = slots[slot].lock().unwrap();
                        let child = held.as_mut().unwrap();
                        if let Some(status) = child.try_wait().unwrap() {
                            *held = None;
                            break status;
                        }
                        // A kill of another process driving this run (`tick` drives every
                        // run due) can leave it in doubt: `--wait` then waits for an operator.
                        if !stuck && began.elapsed() > Duration::from_secs(20) {
                            stuck = true;
                            child.kill().unwrap();
                        }
                        drop(held);
                        std::thread::sleep(Duration::from_millis(20));
                    };
                    if stuck {
                        eprintln!("{key}: waited for an operator");
                    } else if status.signal() == Some(9) {
                        killed.lock().unwrap().push(key);
                    } else {
                        assert!(status.success(), "{key}: {status:?}");
                    }
                }
            })
        })
        .collect();
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("soak seed {seed}");
    let mut rng = Rng(seed);
    let mut done = 0;
    while done < kills && next.load(Ordering::SeqCst) < runs {
        std::thread::sleep(Duration::from_millis(200 + rng.below(1800)));
        let slot = usize::try_from(rng.below(slots.len() as u64)).unwrap();
        if let Some(child) = slots[slot].lock().unwrap().as_mut() {
            child.kill().unwrap();
            done += 1;
        }
    }
    for worker in workers {
        worker.join().unwrap();
    }
    let killed = killed.lock().unwrap().clone();
    eprintln!("{done} kills, {} runs killed", killed.len());

    // The restarts: a run killed before its row was committed starts again with its key;
    // every run that has not ended is driven on (a kill reaches whatever runs the killed
    // process drove, its own or another's woken by its `tick`).
    let listed = env.json(&["runs", "list", "--json"]);
    for i in 0..runs {
        let key = format!("soak-{i}");
        let run = listed
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["idempotency_key"] == key.as_str());
        match run {
            None => {
                eprintln!("{key}: killed before its run row");
                env.json(&["run", "crashy.flow", "--key", &key, "--wait", "--json"]);
            }
            Some(run) if run["status"] != "completed" => {
                let id = run["id"].as_str().unwrap();
                eprintln!("{key}: restarted from {}", run["status"]);
                env.restart(id);
            }
            Some(_) => {}
        }
    }
    let listed = env.json(&["runs", "list", "--json"]);
    let listed = listed.as_array().unwrap();
    assert_eq!(listed.len(), runs, "one run per key");
    let mut recovered = 0;
    for run in listed {
        let id = run["id"].as_str().unwrap();
        let key = run["idempotency_key"].as_str().unwrap();
        check(&env, id, run, key, Window::Anywhere);
        let shown = env.json(&["runs", "show", id, "--json"]);
        let attempts = shown["attempts"].as_array().unwrap();
        recovered += usize::from(attempts.iter().any(|a| a["status"] == "crashed"));
    }
    eprintln!(
        "{runs} runs, {} of them killed in their own process, {recovered} with a crashed attempt",
        killed.len()
    );
}
