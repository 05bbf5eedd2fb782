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

const fn known_on(front: Front, item: u32, tag: &'static str) -> Known {
    Known { tag, item, front }
}

/// Violations known on `main`. Each entry is removed by the lead once the fix for its item is
/// merged; the generated test then fails if the class comes back. Item 0 marks a class found
/// by the model that no item of issue 22 names yet.
pub const KNOWN: &[Known] = &[];

/// Violations known on `main` through the chat loop.
pub const KNOWN_CHAT: &[Known] = &[];

/// Violations known on `main` through the MCP front over stdio.
/// (Each class listed for both MCP clients; none is open.)
pub const KNOWN_MCP: &[[Known; 2]] = &[];

/// Violations known on `main` through a generic (2026-07-28) MCP client only, over stdio and
/// over stateless HTTP.
pub const KNOWN_MCP_NO_TURN_IDS: &[Known] = &[
    // New (item 11's class: one record per call): in the 2026-07-28 era a call that asks a
    // question answers `input_required` first, and that round leaves a `pending` call record
    // beside the answered call's own.
    known_on(Front::McpNoTurnIds, 0, "pending-round-recorded-apart"),
    // New: in the 2026-07-28 era a question asked inside a forked skill's (or an agent's)
    // run answers `input_required` for the whole call, and the client's retry runs the fork
    // again from the start: two records of one call, and the agent's earlier calls run twice.
    known_on(Front::McpNoTurnIds, 0, "rerun-after-input-required"),
    // The same two classes over stateless HTTP, where every question is an `input_required`
    // round too.
    known_on(Front::McpHttpStateless, 0, "pending-round-recorded-apart"),
    known_on(Front::McpHttpStateless, 0, "rerun-after-input-required"),
];

/// Whether the class `tag` is known for `front`.
pub fn is_known(front: Front, tag: &str) -> bool {
    KNOWN
        .iter()
        .chain(KNOWN_MCP.iter().flatten())
        .chain(KNOWN_MCP_NO_TURN_IDS)
        .chain(KNOWN_CHAT)
        .any(|k| k.front == front && k.tag == tag)
}

/// Whether `violation` is known for `front`.
pub fn known(front: Front, violation: &Violation) -> Option<&'static Known> {
    KNOWN
        .iter()
        .chain(KNOWN_MCP.iter().flatten())
        .chain(KNOWN_MCP_NO_TURN_IDS)
        .chain(KNOWN_CHAT)
        .find(|k| k.front == front && k.tag == violation.tag)
}
