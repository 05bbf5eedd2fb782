//! What a catalog left out without an error, said by every command that builds one (not only
//! `quiver lint`), so nothing goes missing without a word.

use quiver_catalog::Catalog;
use quiver_package::Diagnostic;

/// Warnings about packages that are not loaded at all, which every command that builds a
/// catalog says in full (not only `quiver lint`): a root the scan stopped in, a folder laid
/// out for another system, a tool folder without `tool.yaml`.
const SAID_AT_LOAD: [&str; 3] = [
    "root-too-many-folders",
    quiver_package::foreign::CODE,
    "tool-missing-file",
];

/// The notices of `catalog` about what it left out without an error: each root the scan
/// stopped in, each folder laid out for another system, each tool folder without `tool.yaml`
/// (with the hint that says what to rename or add).
pub fn load_notices(catalog: &Catalog) -> Vec<String> {
    catalog
        .diagnostics()
        .iter()
        .filter(|d| said_at_load(d))
        .map(notice)
        .collect()
}

/// A [`SAID_AT_LOAD`] warning as a notice: the file, the message and the hint.
pub(crate) fn notice(d: &Diagnostic) -> String {
    let mut text = format!("warning: {}: {}", d.file.display(), d.message);
    if let Some(help) = &d.help {
        text.push_str(&format!("\n\nhint: {help}"));
    }
    text
}

/// Whether `d` is one of the warnings said at every load ([`SAID_AT_LOAD`]).
pub(crate) fn said_at_load(d: &Diagnostic) -> bool {
    SAID_AT_LOAD.contains(&d.code)
}
