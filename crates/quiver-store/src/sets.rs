//! The three per-session ordered sets (loaded tools, opened packages, active skills), named
//! once for both backends' SQL.

use crate::error::{Result, StoreError};

/// The three per-session ordered sets: each row has a `seq`, larger for later (or more recently
/// used) items.
#[derive(Clone, Copy)]
pub(crate) enum SetTable {
    /// `loaded_tools`, ordered by last use.
    Tools,
    /// `opened_packages`, ordered by opening.
    Packages,
    /// `active_skills`, ordered by activation.
    Skills,
}

impl SetTable {
    /// Table and item column.
    pub(crate) fn names(self) -> (&'static str, &'static str) {
        match self {
            SetTable::Tools => ("loaded_tools", "tool"),
            SetTable::Packages => ("opened_packages", "package"),
            SetTable::Skills => ("active_skills", "skill"),
        }
    }

    /// The column that stamps an item added with `set_add`; tools are loaded with
    /// `load_tool` instead, which keeps the set's capacity.
    pub(crate) fn added_at(self) -> Result<&'static str> {
        match self {
            SetTable::Packages => Ok("opened_at"),
            SetTable::Skills => Ok("activated_at"),
            SetTable::Tools => Err(StoreError::Invalid(
                "tools are loaded with load_tool".to_owned(),
            )),
        }
    }
}

/// The `seq` for a new or refreshed item, after `items` (a set's items with their `seq`,
/// oldest first).
pub(crate) fn next_seq(items: &[(String, i64)]) -> i64 {
    items.last().map_or(1, |(_, seq)| seq.saturating_add(1))
}
