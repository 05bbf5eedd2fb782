//! `read_skill(id)`: opens a skill (its instructions become active for the conversation and
//! its tools are offered), opens a package without a skill (its exposed items are offered), or
//! reads a file of a skill's folder (`<skill>/references/x.md`, `<skill>/forms.md`, seed
//! 000's `<package>/skill/references/x.md`; which files a skill has is
//! [`quiver_package::skill_files`]'s). What the caller may not see is "no such skill". A skill
//! with `context: fork` runs in a child session instead, as a `decision` call of its package
//! through the whole pipeline.

use quiver_package::tool::{Approval, Category};
use quiver_policy::{SkillTurnRules, ToolFacts, Visibility};
use quiver_store::{AuditEntry, AuditKind, AuditStep};
use serde_json::{Value, json};

use crate::runtime::call::audit::decision;
use crate::runtime::call::{CallKind, Runs, Target};
use crate::runtime::{CallOutcome, CallStatus, MAX_SKILL_FILE_BYTES, RuntimeError, Turn};

/// Who starts a skill: the model (`read_skill`) or a person by hand (`/<skill>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::runtime) enum Invoker {
    /// The model, with `read_skill`.
    Model,
    /// A person, with `/<skill>`.
    User,
}

/// The ways `id` may name a file of a skill, most specific skill first: each split of `id`
/// at a `/` into a skill id and a file relative to the skill's folder
/// (`reports/weekly/forms.md` is `forms.md` of `reports/weekly`, else `weekly/forms.md` of
/// `reports`), and seed 000's form `<package>/skill/<file>`, whose `skill/` names the
/// package's own skill. Which one holds is the caller's to check against the skills' files.
fn file_candidates(id: &str) -> Vec<(&str, &str)> {
    let mut out: Vec<(&str, &str)> = id
        .match_indices('/')
        .map(|(pos, _)| (&id[..pos], &id[pos + 1..]))
        .filter(|(skill, rel)| !skill.is_empty() && !rel.is_empty())
        .collect();
    out.reverse();
    if let Some((package, rest)) = id.split_once('/')
        && let Some(rel) = rest.strip_prefix("skill/")
        && !package.is_empty()
        && !rel.is_empty()
    {
        out.push((package, rel));
    }
    out
}

impl Turn<'_> {
    /// Runs `read_skill` for `id`, started by `invoker`.
    pub(in crate::runtime) fn read_skill(
        &mut self,
        call_id: &str,
        id: &str,
        invoker: Invoker,
        audit: &mut AuditEntry,
    ) -> Result<CallOutcome, RuntimeError> {
        let ok = |content: Value| CallOutcome::new(call_id, CallStatus::Ok, content);
        let no_such = || {
            CallOutcome::new(
                call_id,
                CallStatus::Error,
                json!({"error": format!("no such skill: {id}")}),
            )
        };
        let id = id.trim().trim_end_matches('/');
        // A skill by its id comes first; otherwise the first reading of `id` as a file that
        // a skill the caller may see lists.
        let file = if self.skill_admitted(id, invoker).is_some() {
            None
        } else {
            file_candidates(id).into_iter().find(|(skill_id, rel)| {
                self.skill_visible(skill_id)
                    .is_some_and(|(_, skill)| skill.files.iter().any(|f| f == rel))
            })
        };
        if let Some((skill_id, rel)) = file {
            let Some((package, skill)) = self.skill_visible(skill_id) else {
                return Ok(no_such());
            };
            let package_id = package.id.as_str().to_owned();
            let read = skill.read_file(rel, MAX_SKILL_FILE_BYTES);
            return Ok(match read {
                Ok(text) => {
                    // Reading under a skill opens its package, as opening the skill does.
                    self.runtime
                        .store
                        .open_package(&self.session, &package_id)?;
                    audit
                        .decisions
                        .push(decision(AuditStep::Package, "open", &package_id));
                    ok(json!({"file": format!("{skill_id}/{rel}"), "text": text}))
                }
                Err(d) => CallOutcome::new(
                    call_id,
                    CallStatus::Error,
                    json!({"error": format!("cannot read {skill_id}/{rel}: {}", d.message)}),
                ),
            });
        }
        let package_id = id.split('/').next().unwrap_or(id);
        let catalog = self.catalog.clone();
        let Some(cp) = catalog.package(package_id) else {
            return Ok(no_such());
        };
        if !self.enabled(package_id) {
            return Ok(no_such());
        }
        let package = &cp.package;
        match self.skill_admitted(id, invoker).map(|(_, s)| s.clone()) {
            Some(skill) => {
                if skill.meta.fork {
                    return self.run_forked(call_id, package, &skill, audit);
                }
                let rules = SkillTurnRules::new(
                    &skill.id,
                    package_id,
                    &skill.meta.allowed_tools,
                    &skill.meta.disallowed_tools,
                );
                let activated = self
                    .runtime
                    .store
                    .activate_skill(&self.session, &skill.id)?;
                // Reading it again applies its lists to this turn too.
                self.state.activate_skill(rules);
                // What it lists is what may be called now: without what it just removed.
                let exposed = self.exposed_items(package_id)?;
                if !activated && self.in_transcript.contains(&skill.id) {
                    return Ok(ok(
                        json!({"skill": skill.id, "status": "already active; its instructions are above"}),
                    ));
                }
                // Active, but the caller's transcript does not hold its instructions (another
                // process, a new client on the handle): they are given again.
                self.in_transcript.insert(skill.id.clone());
                let body = skill.body.clone();
                if activated {
                    self.runtime.store.open_package(&self.session, package_id)?;
                    self.runtime.audit_skill(
                        &self.session,
                        &skill.id,
                        AuditKind::SkillActivated,
                        match invoker {
                            Invoker::Model => "read_skill",
                            Invoker::User => "started by the user",
                        },
                    )?;
                    audit
                        .decisions
                        .push(decision(AuditStep::Skill, "activate", &skill.id));
                }
                let files: Vec<String> = skill
                    .files
                    .iter()
                    .map(|f| format!("{}/{f}", skill.id))
                    .collect();
                // What its `tools:` unlocks (all of its own tools without one).
                let unlocked: Vec<String> = skill
                    .unlocks
                    .iter()
                    .filter_map(|name| catalog.item(&format!("{package_id}.{name}")))
                    .filter(|item| self.admitted(item) && !self.removed_this_turn(item))
                    .filter_map(|item| item.wire.clone())
                    .collect();
                Ok(ok(json!({
                    "skill": skill.id,
                    "status": if activated { "activated" } else { "active" },
                    "instructions": body,
                    "files": files,
                    "tools": exposed,
                    "unlocked_tools": unlocked,
                })))
            }
            None if invoker == Invoker::Model && id == package_id && package.skill.is_none() => {
                self.runtime.store.open_package(&self.session, package_id)?;
                audit
                    .decisions
                    .push(decision(AuditStep::Package, "open", package_id));
                let exposed = self.exposed_items(package_id)?;
                Ok(ok(
                    json!({"package": package_id, "status": "opened", "description": package.description, "tools": exposed}),
                ))
            }
            None => Ok(no_such()),
        }
    }

    /// The exposed items of `package_id` this caller may call and is admitted to, as
    /// `read_skill` lists them (a package's agent: only those it declares).
    fn exposed_items(&self, package_id: &str) -> Result<Vec<Value>, RuntimeError> {
        let view = self.view()?;
        Ok(self
            .catalog
            .items()
            .iter()
            .filter(|i| {
                crate::presence::public(&self.catalog, i)
                    && self.package_of(i).id.as_str() == package_id
                    && crate::presence::callable(&self.catalog, &view, i)
                    && self.admitted(i)
                    && !self.removed_this_turn(i)
            })
            .filter_map(|i| {
                i.wire
                    .as_ref()
                    .map(|w| json!({"name": w, "kind": i.kind, "summary": i.summary}))
            })
            .collect())
    }

    /// A skill with `context: fork` runs in a child session with its `agent`, as a `decision`
    /// call through the whole pipeline, instead of becoming active here. With an agent of its
    /// own package (or none) it is a call of the skill's package, which reading a skill of an
    /// admitted package needs no consent for. With `agent: <other>.<agent>` it is that
    /// package's agent called on the conversation's behalf, resolved exactly as a direct call
    /// of it: a private agent of another package (or one the caller may not reach) is an
    /// unknown agent, and an exposed one asks that package's consent.
    fn run_forked(
        &mut self,
        call_id: &str,
        package: &quiver_package::Package,
        skill: &quiver_package::skill::Skill,
        audit: &mut AuditEntry,
    ) -> Result<CallOutcome, RuntimeError> {
        if let Some(agent) = skill.meta.agent.as_deref().filter(|a| {
            a.split_once('.')
                .is_some_and(|(p, _)| p != package.id.as_str())
        }) {
            return self.run_forked_into(call_id, skill, agent, audit);
        }
        let local = skill.id.split_once('/').map_or("skill", |(_, s)| s);
        let mut facts = ToolFacts::new(package.id.as_str(), local);
        facts.package_permission = Some(&package.manifest.permissions);
        facts.category = Category::Decision;
        facts.approval = Approval::Never;
        facts.visibility = Visibility::Exposed;
        let target = Target {
            kind: CallKind::ForkedSkill,
            asked_as: skill.id.clone(),
            qualified: format!("{}.{local}", package.id),
            package,
            facts,
            item: None,
            offered: true,
            touch: false,
            input: None,
            first_string: None,
            runs: Runs::ForkedSkill(skill),
        };
        let mut out = self.run_target(call_id, &target, Value::Null, audit)?;
        audit.skill = Some(skill.id.clone());
        out.kind = Some(CallKind::ForkedSkill);
        Ok(out)
    }

    /// A fork into `agent`, an agent of another package: the call is that agent's, resolved
    /// and governed as the conversation's own direct call of it (visibility, admission,
    /// consent for its package), and runs the skill's instructions as its task.
    fn run_forked_into(
        &mut self,
        call_id: &str,
        skill: &quiver_package::skill::Skill,
        agent: &str,
        audit: &mut AuditEntry,
    ) -> Result<CallOutcome, RuntimeError> {
        audit.skill = Some(skill.id.clone());
        let catalog = self.catalog.clone();
        let input = crate::runtime::call::resolve::agent_input();
        let resolved = self
            .resolve(&catalog, agent, &Value::Null, &input)?
            .filter(|t| t.kind == CallKind::Agent);
        let Some(mut target) = resolved else {
            audit.decisions.push(decision(
                AuditStep::Resolve,
                "unknown",
                &format!(
                    "`{agent}`, the agent of skill `{}`, is not one this caller may call",
                    skill.id
                ),
            ));
            return Ok(CallOutcome::new(
                call_id,
                CallStatus::Unknown,
                json!({"error": format!("skill `{}` cannot run: unknown agent `{agent}`", skill.id)}),
            ));
        };
        target.kind = CallKind::ForkedSkill;
        target.input = None;
        target.runs = Runs::ForkedSkill(skill);
        let mut out = self.run_target(call_id, &target, Value::Null, audit)?;
        out.kind = Some(CallKind::ForkedSkill);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::file_candidates;

    #[test]
    fn a_file_id_is_read_every_way_it_may_be_split() {
        let cases: [(&str, &[(&str, &str)]); 7] = [
            ("weather", &[]),
            ("weather/forms.md", &[("weather", "forms.md")]),
            (
                "weather/references/cities.md",
                &[
                    ("weather/references", "cities.md"),
                    ("weather", "references/cities.md"),
                ],
            ),
            (
                "weather/skill/reference.md",
                &[
                    ("weather/skill", "reference.md"),
                    ("weather", "skill/reference.md"),
                    ("weather", "reference.md"),
                ],
            ),
            (
                "reports/weekly/reference/foo.md",
                &[
                    ("reports/weekly/reference", "foo.md"),
                    ("reports/weekly", "reference/foo.md"),
                    ("reports", "weekly/reference/foo.md"),
                ],
            ),
            ("/references/x.md", &[("/references", "x.md")]),
            ("weather/skill/", &[("weather", "skill/")]),
        ];
        for (id, want) in cases {
            assert_eq!(file_candidates(id), want, "{id}");
        }
    }
}
