//! `proptest` strategies: small catalogs whose files name anything (other packages' private
//! items, agents that do not exist), callers, and conversations.

use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;

use crate::world::{
    Agent, Approval, Caller, Category, ListEntry, NameForm, Op, Package, Prompt, PromptProfile,
    Ref, Restrict, Role, SCRIPT_TOOL, Script, Skill, Step, Target, Tool, Workflow, World,
};

/// Most packages in a generated catalog.
pub const MAX_PACKAGES: usize = 3;

fn restrict() -> impl Strategy<Value = Restrict> {
    prop_oneof![
        4 => Just(Restrict::None),
        1 => Just(Restrict::Master),
        1 => Just(Restrict::Group),
        1 => Just(Restrict::Qq),
    ]
}

fn tool() -> impl Strategy<Value = Tool> {
    (
        any::<bool>(),
        prop::bool::weighted(0.15),
        prop_oneof![
            Just(Category::Action),
            Just(Category::Perception),
            Just(Category::Decision)
        ],
        prop_oneof![
            Just(Approval::Never),
            Just(Approval::OnRisk),
            Just(Approval::Once),
            Just(Approval::Always),
            Just(Approval::Human),
        ],
        prop::bool::weighted(0.15),
        restrict(),
        prop::bool::weighted(0.3),
    )
        .prop_map(
            |(expose, hidden, category, approval, dangerous, restrict, secret)| Tool {
                expose,
                hidden,
                category,
                approval,
                dangerous,
                restrict,
                secret,
            },
        )
}

/// A local name of anything a package may have (it need not exist).
fn local_name() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("t0".to_owned()),
        Just("t1".to_owned()),
        Just("t2".to_owned()),
        Just("s0k0".to_owned()),
        Just("s1k0".to_owned()),
        Just("a0".to_owned()),
        Just("a1".to_owned()),
    ]
}

fn reference() -> impl Strategy<Value = Ref> {
    (0..MAX_PACKAGES, local_name()).prop_map(|(package, name)| Ref { package, name })
}

/// A tool of any package (it need not exist): what a workflow's `tool:` step names.
fn tool_ref() -> impl Strategy<Value = Ref> {
    let name = prop_oneof![
        3 => Just("t0".to_owned()),
        3 => Just("t1".to_owned()),
        3 => Just("t2".to_owned()),
        1 => Just("s0k0".to_owned()),
        1 => Just("s1k0".to_owned()),
    ];
    (0..MAX_PACKAGES, name).prop_map(|(package, name)| Ref { package, name })
}

fn agent_ref() -> impl Strategy<Value = Ref> {
    (0..MAX_PACKAGES, 0..2usize).prop_map(|(package, a)| Ref {
        package,
        name: format!("a{a}"),
    })
}

fn list_entry() -> impl Strategy<Value = ListEntry> {
    prop_oneof![
        4 => local_name().prop_map(ListEntry::Bare),
        4 => reference().prop_map(ListEntry::Qualified),
        1 => Just(ListEntry::Bare(SCRIPT_TOOL.to_owned())),
    ]
}

fn skill(scoped: bool) -> impl Strategy<Value = Skill> {
    let tools = option::weighted(
        0.4,
        vec(
            prop_oneof![local_name(), reference().prop_map(|r| r.qualified())],
            0..3,
        ),
    );
    (
        prop_oneof![4 => Just(Restrict::None), 1 => Just(Restrict::Master), 1 => Just(Restrict::Group)],
        tools,
        vec(list_entry(), 0..3),
        vec(list_entry(), 0..2),
        option::weighted(0.25, agent_ref()),
        vec(tool(), if scoped { 0..3 } else { 0..1 }),
        prop::bool::weighted(0.7),
    )
        .prop_map(
            move |(restrict, tools, allowed, disallowed, fork, scoped_tools, script)| Skill {
                restrict,
                tools,
                allowed,
                disallowed,
                fork,
                scoped: if scoped { scoped_tools } else { Vec::new() },
                script,
            },
        )
}

fn agent() -> impl Strategy<Value = Agent> {
    (any::<bool>(), vec(reference(), 0..3)).prop_map(|(expose, tools)| Agent { expose, tools })
}

fn prompt() -> impl Strategy<Value = Prompt> {
    (
        prop::bool::weighted(0.5),
        prop_oneof![
            2 => Just(None),
            1 => Just(Some(PromptProfile::Interactive)),
            1 => Just(Some(PromptProfile::Schedule)),
        ],
    )
        .prop_map(|(required, profile)| Prompt { required, profile })
}

fn workflow() -> impl Strategy<Value = Workflow> {
    let step = prop_oneof![
        3 => tool_ref().prop_map(Step::Tool),
        1 => agent_ref().prop_map(Step::Agent),
        1 => Just(Step::Approval),
    ];
    (any::<bool>(), vec(step, 1..3)).prop_map(|(expose, steps)| Workflow { expose, steps })
}

fn package() -> impl Strategy<Value = Package> {
    (
        vec(tool(), 0..4),
        option::weighted(0.5, skill(false)),
        vec(skill(true), 0..3),
        vec(agent(), 0..3),
        vec(prompt(), 0..2),
        vec(workflow(), 0..2),
    )
        .prop_map(
            |(tools, root_skill, skills, agents, prompts, workflows)| Package {
                tools,
                root_skill,
                skills,
                agents,
                prompts,
                workflows,
            },
        )
}

/// A catalog of 1 to [`MAX_PACKAGES`] packages. Workflow steps name items of packages that
/// exist (a step's package number wraps), so that runs get past their first step.
pub fn world() -> impl Strategy<Value = World> {
    vec(package(), 1..=MAX_PACKAGES).prop_map(|mut packages| {
        let n = packages.len();
        for step in packages
            .iter_mut()
            .flat_map(|p| &mut p.workflows)
            .flat_map(|w| &mut w.steps)
        {
            if let Step::Tool(r) | Step::Agent(r) = step {
                r.package %= n;
            }
        }
        World { packages }
    })
}

/// A caller: the owner, a plain user or an anonymous one, local or in a QQ group, present or
/// not.
pub fn caller() -> impl Strategy<Value = Caller> {
    (
        prop_oneof![Just(Role::Master), Just(Role::User), Just(Role::Anonymous)],
        any::<bool>(),
        prop::bool::weighted(0.2),
    )
        .prop_map(|(role, in_qq_group, unattended)| Caller {
            role,
            in_qq_group,
            unattended,
        })
}

/// A call target (it need not exist).
pub fn target() -> impl Strategy<Value = Target> {
    prop_oneof![
        4 => (0..MAX_PACKAGES, 0..4usize).prop_map(|(p, t)| Target::Tool(p, t)),
        2 => (0..MAX_PACKAGES, 0..2usize, 0..2usize).prop_map(|(p, s, k)| Target::Scoped(p, s, k)),
        2 => (0..MAX_PACKAGES, 0..2usize).prop_map(|(p, a)| Target::Agent(p, a)),
        1 => (0..MAX_PACKAGES, 0..2usize).prop_map(|(p, w)| Target::Workflow(p, w)),
    ]
}

fn form() -> impl Strategy<Value = NameForm> {
    prop_oneof![Just(NameForm::Wire), Just(NameForm::Qualified)]
}

fn skill_id() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => (0..MAX_PACKAGES).prop_map(|p| format!("p{p}")),
        3 => (0..MAX_PACKAGES, 0..2usize).prop_map(|(p, s)| format!("p{p}/s{s}")),
        1 => Just("nope".to_owned()),
    ]
}

fn script() -> impl Strategy<Value = Script> {
    prop_oneof![
        6 => Just(Script::Own),
        1 => Just(Script::Missing),
        1 => (0..MAX_PACKAGES).prop_map(Script::Outside),
    ]
}

/// One step of a conversation.
pub fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => skill_id().prop_map(Op::ReadSkill),
        1 => (target(), form()).prop_map(|(t, f)| Op::LoadTool(t, f)),
        8 => (target(), form()).prop_map(|(t, f)| Op::Call(t, f)),
        1 => (0..crate::write::WORDS.len()).prop_map(|w| Op::Search(crate::write::WORDS[w].to_owned())),
        1 => any::<bool>().prop_map(Op::ConsentAnswer),
        1 => any::<bool>().prop_map(Op::ApprovalAnswer),
        2 => Just(Op::NewTurn),
        1 => any::<bool>().prop_map(Op::EmergencyStop),
        2 => (skill_id(), script()).prop_map(|(id, s)| Op::RunScript(id, s)),
        1 => (0..4usize).prop_map(Op::TriggerRun),
        2 => prop::bool::weighted(0.8).prop_map(Op::AnswerRun),
    ]
}

/// One step, or (one in five) a skill read followed by a run of its script.
fn chunk() -> impl Strategy<Value = Vec<Op>> {
    prop_oneof![
        8 => op().prop_map(|op| vec![op]),
        2 => (skill_id(), script())
            .prop_map(|(id, s)| vec![Op::ReadSkill(id.clone()), Op::RunScript(id, s)]),
    ]
}

/// A conversation of 1 to `max` steps (a read and a run of its script count as one).
pub fn ops(max: usize) -> impl Strategy<Value = Vec<Op>> {
    vec(chunk(), 1..max).prop_map(|chunks| chunks.concat())
}

/// A whole case: a catalog, a caller and a conversation.
pub fn case() -> impl Strategy<Value = (World, Caller, Vec<Op>)> {
    // Up to 19 chunks of one or two steps: about 12 steps on average.
    (world(), caller(), ops(20))
}

/// An edit of a catalog (hot reload): flip a tool's `expose`, remove a skill or the last
/// package, or add a package.
pub fn edit() -> impl Strategy<Value = crate::versions::Edit> {
    use crate::versions::Edit;
    prop_oneof![
        3 => (0..MAX_PACKAGES, 0..3usize).prop_map(|(p, t)| Edit::FlipExpose(p, t)),
        2 => (0..MAX_PACKAGES, 0..3usize).prop_map(|(p, s)| Edit::RemoveSkill(p, s)),
        1 => Just(Edit::RemovePackage),
        2 => package().prop_map(|p| Edit::AddPackage(Box::new(p))),
    ]
}
