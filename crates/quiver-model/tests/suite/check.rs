//! The invariants of issue 22, the violations a driver reports, and the list of violations
//! known on `main` (each tied to the item; the lead removes an entry once its fix is
//! merged, and the generated tests then hold it).

use std::fmt;

/// An invariant checked after every step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Invariant {
    /// Everything offered (the tool list, `read_skill`'s `tools` and `unlocked_tools`,
    /// `tool_search`'s results) may be called by the rules.
    OfferedIsCallable,
    /// Nothing callable was not offered or loadable by the rules.
    CallableIsReachable,
    /// Nothing private runs for a caller outside its package.
    PrivateStaysHome,
    /// Every exposed item that runs on the conversation's behalf had its package's consent.
    ConsentBeforeExposed,
    /// No grant (an `allowed-tools` pre-approval) outlives its turn: an approval the rules
    /// require is asked.
    GrantWithinTurn,
    /// Nothing runs under the emergency stop.
    NothingUnderStop,
    /// A required prompt section is present, or the front fails.
    RequiredSectionPresent,
    /// Every started call has exactly one audit record, with no secret argument in it.
    OneAuditRecord,
    /// A workflow run whose step needs a person's answer when no person is present parks
    /// (`waiting`), never fails, and no step whose tool never started leaves it in doubt.
    RunsPark,
    /// The rest of the verdict (unknown, refused, asked, ran) is the model's.
    VerdictIsModels,
}

/// One violation: the invariant, a tag naming its class (what the known list matches), and
/// what happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The invariant broken.
    pub invariant: Invariant,
    /// The class of the violation (`scoped-tool-offered`, `fork-into-private-agent`, ...).
    pub tag: String,
    /// The step (index into the conversation) and what was seen.
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} [{}]: {}", self.invariant, self.tag, self.detail)
    }
}

/// A class of violation known on `main`, with the issue 22 item that fixes it.
pub struct Known {
    /// The tag.
    pub tag: &'static str,
    /// The item of issue 22.
    pub item: u32,
    /// The driver (front) it is seen through.
    pub front: Front,
}

/// The front a driver goes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Front {
    /// The runtime API in process (`Runtime`, `Turn`).
    Runtime,
    /// The MCP front over stdio, a 2025-11-25 client that marks its turns (`_meta` turn ids).
    McpTurnIds,
    /// The MCP front over stdio, a generic 2026-07-28 client that sends no turn id.
    McpNoTurnIds,
    /// The MCP front over Streamable HTTP on a loopback socket, a 2025-11-25 client in an
    /// `Mcp-Session-Id` session that marks its turns, with the owner's bearer token.
    McpHttpSession,
    /// The MCP front over Streamable HTTP on a loopback socket, a generic 2026-07-28 client
    /// whose requests stand alone: it passes back the conversation handle, sends no turn id,
    /// and answers questions by retrying with `inputResponses` and `requestState`.
    McpHttpStateless,
    /// `quiver chat`'s agent loop with a scripted model, sub-agents run by `SubAgents`.
    Chat,
}

/// Violation classes known on `main`, each `Known { tag, item, front }` for every front it is
/// seen through. A class the model finds is listed here until its fix is merged, which removes
/// the entry; the generated test then fails if the class comes back. Item 0 marks a class that
/// no item of issue 22 names. None is open.
pub const KNOWN: &[Known] = &[];

/// Whether the class `tag` is known for `front`.
pub fn is_known(front: Front, tag: &str) -> bool {
    KNOWN.iter().any(|k| k.front == front && k.tag == tag)
}

/// Whether `violation` is known for `front`.
pub fn known(front: Front, violation: &Violation) -> Option<&'static Known> {
    KNOWN
        .iter()
        .find(|k| k.front == front && k.tag == violation.tag)
}
