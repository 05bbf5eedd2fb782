//! Who talks, and what they do: a caller, and the operations of a conversation (calls,
//! reads, searches, answers, new turns, the operator's stop, skill scripts, and runs started
//! by a trigger or answered in another process).

use super::Target;

/// Who is talking and from where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caller {
    /// The sender's role.
    pub role: Role,
    /// Whether the conversation is a QQ group (`qq`, `group:1`) or local (CLI, MCP).
    pub in_qq_group: bool,
    /// Whether nobody is present (a `schedule` session).
    pub unattended: bool,
}

/// The sender's identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A known user with role `master` (the owner).
    Master,
    /// A known user with role `user`.
    User,
    /// No identity (no token, anonymous HTTP).
    Anonymous,
}

/// How a call names its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameForm {
    /// `p0__t0`.
    Wire,
    /// `p0.t0`.
    Qualified,
}

/// One step of a conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// `read_skill` of a package id, a skill id, or a name that is no skill.
    ReadSkill(String),
    /// `load_tool(name)`.
    LoadTool(Target, NameForm),
    /// A direct call of a tool or agent by name.
    Call(Target, NameForm),
    /// `tool_search` for a word.
    Search(String),
    /// How the person answers the next consent questions.
    ConsentAnswer(bool),
    /// How the person answers the next approval questions.
    ApprovalAnswer(bool),
    /// A new turn (a new user message).
    NewTurn,
    /// The operator's emergency stop on or off.
    EmergencyStop(bool),
    /// `run_skill_script(skill, script)` of a skill id (right or wrong) and a script.
    RunScript(String, Script),
    /// The `i`-th workflow of the catalog (counting on from the first past the last; nothing
    /// when there is none) started by its trigger (a schedule, an event): a run with nobody
    /// present, for the scheduler's principal.
    TriggerRun(usize),
    /// In another process (a second runtime over the same state database, as `quiver
    /// approvals` is), the owner answers the oldest run parked on a person, and the run is
    /// driven on there, with nobody present.
    AnswerRun(bool),
}

/// The name the runtime gives a skill script's calls (`<package>.run_skill_script`).
pub const SCRIPT_TOOL: &str = "run_skill_script";

/// The script a `run_skill_script` call names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Script {
    /// `go.sh`: the skill's script, if it has one.
    Own,
    /// `nope.sh`: no such file.
    Missing,
    /// `../../p{k}/scripts/go.sh`: a path out of `scripts/`, at another package's script.
    Outside(usize),
}

impl Script {
    /// The `script` argument.
    pub fn argument(self) -> String {
        match self {
            Script::Own => "go.sh".to_owned(),
            Script::Missing => "nope.sh".to_owned(),
            Script::Outside(k) => format!("../../p{k}/scripts/go.sh"),
        }
    }
}
