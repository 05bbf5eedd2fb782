//! What every driver shares: a generated world written as real package folders, a real
//! SQLite file, tools and skill scripts run by `BuiltinExecutor` (in process: every generated
//! tool is registered, so a case takes milliseconds instead of a sandboxed process per call),
//! the person and the sub-agents a case plays (`players`), and the [`Checker`] of each step,
//! whose checks on what ran and what it left on record are in `ran`, on skill scripts in
//! `scripts` and on workflow runs in `runs`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use quiver_model::rules::Session;
use quiver_model::world::{Caller, PromptProfile, Role, Target, World};
use quiver_model::write::{section_marker, write_world};
use quiver_policy::{Origin, Principal, ScopeKind};
use quiver_runtime::approver::{Approver, Card};
use quiver_runtime::executor::BuiltinExecutor;
use quiver_runtime::{ApproverSet, CallOutcome, Runtime, RuntimeConfig};
use quiver_store::{SqliteStore, Store, StoreOptions, Synchronous};
use serde_json::{Value, json};

use super::check::{Invariant, Violation};
use super::players::{Person, Runner};
use super::runs::Tracked;

/// The secret value every secret argument carries; it must never reach the audit log.
pub const SECRET: &str = "hunter2-very-secret";

/// The arguments a call of `target` sends: a task for an agent, a text (and the secret where
/// the tool has one) for a tool.
pub fn arguments(world: &World, target: Option<&Target>) -> Value {
    match target {
        Some(t @ Target::Workflow(..)) if world.exists(t) => json!({}),
        Some(t @ Target::Agent(..)) if world.exists(t) => json!({"task": "do it"}),
        Some(t) if world.tool(t).is_some_and(|tool| tool.secret) => {
            json!({"text": "x", "token": SECRET})
        }
        _ => json!({"text": "x"}),
    }
}

/// The principal of a caller.
pub fn principal(caller: &Caller) -> Principal {
    match caller.role {
        Role::Master => Principal::user("owner", quiver_package::rules::Role::Master),
        Role::User => Principal::user("u1", quiver_package::rules::Role::User),
        Role::Anonymous => Principal::anonymous(),
    }
}

/// The origin of a caller.
pub fn origin(caller: &Caller) -> Origin {
    if caller.in_qq_group {
        Origin::on("qq", ScopeKind::Group, "1")
    } else {
        Origin::default()
    }
}

/// One case run against the runtime: every violation seen, in step order.
pub struct Run {
    /// The violations.
    pub violations: Vec<Violation>,
    /// Every tool that ran, `<package>.<tool>`, in order.
    pub ran: Vec<String>,
}

/// The state a case runs in.
pub struct Harness {
    /// The case's folder: its packages and its state database (`state.db`), as a host's
    /// state folder holds it.
    pub dir: tempfile::TempDir,
    pub runtime: Arc<Runtime>,
    pub store: Arc<SqliteStore>,
    pub person: Arc<Person>,
    pub runner: Arc<Runner>,
    pub runs: Arc<Mutex<Vec<(String, String)>>>,
}

impl Harness {
    /// The tools that ran in the case, in order (`<package>.<tool>`).
    pub fn ran(&self) -> Vec<String> {
        self.runs
            .lock()
            .unwrap()
            .iter()
            .map(|(q, _)| q.clone())
            .collect()
    }
}

/// A migrated, empty state database, made once per process: a case copies it (opening a new
/// database runs every migration, ~25–70 ms on this machine; a copy takes ~2 ms).
pub fn template_db() -> &'static std::path::Path {
    static TEMPLATE: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    let dir = TEMPLATE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        drop(SqliteStore::open(dir.path().join("state.db")).unwrap());
        dir
    });
    Box::leak(dir.path().join("state.db").into_boxed_path())
}

/// The harness of one case; `person`: whether the runtime's person answers questions (the
/// runtime API, chat) or the front brings its own (MCP elicitation).
pub fn harness(world: &World, person_present: bool) -> Harness {
    harness_for(world, person_present, false)
}

/// The harness of one case; `chat`: the agent loop runs agents (`quiver chat`'s
/// `SubAgents`, set by the caller) with the agents' meta-tools configured as the host does,
/// instead of this suite's runner.
pub fn harness_for(world: &World, person_present: bool, chat: bool) -> Harness {
    harness_placed(world, person_present, chat, 0)
}

/// The harness of one case whose packages in the bit mask `installed` (bit `p`: package `p`)
/// are installed (`installed::install`) instead of sitting in the project root.
pub fn harness_placed(world: &World, person_present: bool, chat: bool, installed: u32) -> Harness {
    harness_over(world, &[world], person_present, chat, installed)
}

/// The harness of one case over `world` whose executor runs the tools of every world of
/// `tools_of` (the catalog versions a reload swaps in).
pub fn harness_over(
    world: &World,
    tools_of: &[&World],
    person_present: bool,
    chat: bool,
    installed: u32,
) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let packages = dir.path().join("packages");
    write_world(world, &packages).unwrap();
    let (catalog, refused) = super::installed::catalog(dir.path(), &packages, installed);
    assert!(
        refused
            .iter()
            .all(|p| !Session::installable(world, *p as usize)),
        "the install refused a package the model takes: {refused:?}"
    );
    let mut config = RuntimeConfig::default();
    if chat {
        for (agent, metas) in quiver_agent::agents::agent_meta_tools(&catalog) {
            config.agent_meta_tools.entry(agent).or_insert(metas);
        }
    }
    let db = dir.path().join("state.db");
    std::fs::copy(template_db(), &db).unwrap();
    let store = Arc::new(SqliteStore::open_with(&db, &store_options()).unwrap());
    let runs: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let executor = executor(tools_of, &runs);
    let person = Arc::new(Person::default());
    let approvers = ApproverSet {
        person: person_present.then(|| person.clone() as Arc<dyn Approver>),
        console: None,
        reviewer: None,
    };
    let runtime = Arc::new(Runtime::new(
        catalog,
        store.clone(),
        Arc::new(executor),
        approvers,
        config,
    ));
    let runner = Arc::new(Runner {
        world: Mutex::new(world.clone()),
        tasks: Mutex::default(),
        children: Mutex::default(),
    });
    if !chat {
        runtime.set_agent_runner(runner.clone());
    }
    runtime.set_workflow_store(store.clone());
    Harness {
        store,
        dir,
        runtime,
        person,
        runner,
        runs,
    }
}

/// How a case opens its state database: one reader, `synchronous = NORMAL`.
pub fn store_options() -> StoreOptions {
    StoreOptions {
        readers: 1,
        synchronous: Synchronous::Normal,
        ..StoreOptions::default()
    }
}

/// Runs every tool of `world`, and every package's skill scripts (as the built-in
/// `<package>.run_skill_script`, which the runtime names a script's call), in process; each
/// run is recorded in `runs` as `(<package>.<tool>, session)`.
pub fn executor(worlds: &[&World], runs: &Arc<Mutex<Vec<(String, String)>>>) -> BuiltinExecutor {
    let mut executor = BuiltinExecutor::new();
    let all = worlds.iter().flat_map(|world| {
        let scripts = (0..world.packages.len()).map(Target::Script);
        world
            .targets()
            .into_iter()
            .chain(scripts)
            .map(move |t| (*world, t))
    });
    for (world, target) in all {
        if world.tool(&target).is_none() && !matches!(target, Target::Script(_)) {
            continue;
        }
        let runs = runs.clone();
        let name = target.qualified();
        executor.register(
            &target.qualified(),
            Arc::new(move |_args: &Value, ctx| {
                runs.lock()
                    .unwrap()
                    .push((name.clone(), ctx.session_id.clone()));
                Ok(json!({"ok": true}))
            }),
        );
    }
    executor
}

/// Checks each step of one case.
pub struct Checker<'a> {
    /// The catalog the open turn holds.
    pub world: &'a World,
    /// The catalog whose folders are on disk, when a reload swapped in a later one than the
    /// open turn holds (a skill script is the file on disk at the call).
    pub disk: Option<&'a World>,
    pub h: &'a Harness,
    pub session: String,
    pub model: Session,
    pub violations: Vec<Violation>,
    pub step: usize,
    pub seen_runs: usize,
    pub seen_tasks: usize,
    pub seen_cards: usize,
    /// Call records of the conversation counted so far (the MCP driver's check).
    pub seen_records: usize,
    /// Items the runtime made reachable through a difference already reported, with its tag:
    /// a later call of one is reported under the same class.
    pub excused: BTreeMap<Target, String>,
    /// The workflow runs of the case, the model's beside the runtime's.
    pub runs: Vec<Tracked>,
    /// The second process: a runtime over the same state database, opened at the first
    /// answer to a parked run.
    pub second: Option<Arc<Runtime>>,
}

impl<'a> Checker<'a> {
    /// The checker of a conversation `session` of `model.caller` over `world` in `h`.
    pub fn new(world: &'a World, h: &'a Harness, session: String, model: Session) -> Checker<'a> {
        Checker {
            world,
            disk: None,
            h,
            session,
            model,
            violations: Vec::new(),
            step: 0,
            seen_runs: 0,
            seen_tasks: 0,
            seen_cards: 0,
            seen_records: 0,
            excused: BTreeMap::new(),
            runs: Vec::new(),
            second: None,
        }
    }
}

impl Checker<'_> {
    /// Every required section this caller's profile admits is in `text`.
    pub fn check_sections(&mut self, text: &str, place: &str) {
        let unattended = self.model.caller.unattended;
        for (p, package) in self.world.packages.iter().enumerate() {
            for (r, prompt) in package.prompts.iter().enumerate() {
                let profile_ok = match prompt.profile {
                    None => true,
                    Some(PromptProfile::Interactive) => !unattended,
                    Some(PromptProfile::Schedule) => unattended,
                };
                if prompt.required && profile_ok && !text.contains(&section_marker(p, r)) {
                    self.report(
                        Invariant::RequiredSectionPresent,
                        "required-section-missing",
                        format!("p{p}/r{r} is required and absent from {place}"),
                    );
                }
            }
        }
    }

    pub fn report(&mut self, invariant: Invariant, tag: &str, detail: String) {
        self.violations.push(Violation {
            invariant,
            tag: tag.to_owned(),
            detail: format!("step {}: {detail}", self.step),
        });
    }

    /// The cards asked in the main session since the last look.
    pub fn new_cards(&mut self) -> Vec<Card> {
        let cards = self.h.person.cards.lock().unwrap();
        let fresh = cards[self.seen_cards..]
            .iter()
            .filter(|c| c.session == self.session)
            .cloned()
            .collect();
        self.seen_cards = cards.len();
        fresh
    }

    pub fn target_of_wire(&self, wire: &str) -> Option<Target> {
        self.world.targets().into_iter().find(|t| t.wire() == wire)
    }

    /// Whether the rules let the conversation call `target` now, locks aside.
    pub fn may_call(&self, target: &Target) -> bool {
        self.model.reaches(self.world, target)
            && !Session::private(self.world, target)
            && !self.model.disallowed(self.world, target)
    }

    /// What `read_skill` lists may be called.
    pub fn check_listed(&mut self, body: &Value, what: &str) {
        for key in ["tools", "unlocked_tools"] {
            let listed: Vec<String> = body[key]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| {
                    v.get("name")
                        .or(Some(v))
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                })
                .collect();
            for name in listed {
                let Some(target) = self.target_of_wire(&name) else {
                    continue;
                };
                if !self.may_call(&target) {
                    let tag = match target {
                        Target::Scoped(..) => "read-skill-lists-scoped-tool",
                        _ if self.model.disallowed(self.world, &target) => {
                            "read-skill-lists-disallowed"
                        }
                        _ => "read-skill-lists-uncallable",
                    };
                    self.report(
                        Invariant::OfferedIsCallable,
                        tag,
                        format!("{what} lists {name} in `{key}`, which may not be called"),
                    );
                }
            }
        }
    }

    /// The class of an uncallable item `tool_search` found.
    pub fn search_tag(&self, target: &Target) -> &'static str {
        if self.model.disallowed(self.world, target) {
            return "search-finds-disallowed";
        }
        match self.offered_tag(target) {
            "scoped-tool-offered" | "private-item-offered" | "uncallable-item-offered" => {
                "search-finds-uncallable"
            }
            tag => tag,
        }
    }

    /// The class of an uncallable item that was offered or answered.
    pub fn offered_tag(&self, target: &Target) -> &'static str {
        match *target {
            Target::Scoped(p, s, _) => {
                let id = format!("p{p}/s{s}");
                let empty_list = self
                    .world
                    .skill(&id)
                    .is_some_and(|(_, _, skill)| skill.tools.as_ref().is_some_and(Vec::is_empty));
                match (self.model.active.contains(&id), empty_list) {
                    (true, true) => "empty-tools-list-unlocks-all",
                    (true, false) => "scoped-tool-unlocked-beyond-tools-list",
                    (false, _) => "scoped-tool-offered",
                }
            }
            _ if Session::private(self.world, target) => "private-item-offered",
            _ => "uncallable-item-offered",
        }
    }

    /// Takes the session's consents as the store holds them, so that one difference from the
    /// model (reported where it happens) does not echo in every later step.
    pub fn sync_consents(&mut self) {
        let consents = self.h.store.consents(&self.session).unwrap();
        self.model.consent = consents
            .iter()
            .filter_map(|c| {
                let p = c.package.strip_prefix('p')?.parse().ok()?;
                Some((p, c.granted))
            })
            .collect();
    }
}

pub fn error_text(out: &CallOutcome) -> String {
    out.content
        .get("error")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}
