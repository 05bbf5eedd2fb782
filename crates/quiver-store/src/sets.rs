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

/// Whether loading `tool` into a session whose loaded tools are `items` (with their `seq`,
/// least recently used first) would change nothing: it is the most recently used already and
/// the set holds no more than `capacity`, so there is nothing to reorder or evict (and the
/// presence stamp need not move).
pub(crate) fn loaded_last(items: &[(String, i64)], tool: &str, capacity: usize) -> bool {
    items.last().is_some_and(|(name, _)| name == tool) && items.len() <= capacity
}

#[cfg(test)]
mod tests {
    use super::loaded_last;

    #[test]
    fn a_load_changes_nothing_only_for_the_last_tool_within_capacity() {
        let set = |names: &[&str]| -> Vec<(String, i64)> {
            (1..)
                .zip(names)
                .map(|(seq, n)| ((*n).to_owned(), seq))
                .collect()
        };
        // (loaded, least recent first; tool; capacity; nothing to do)
        let cases: [(&[&str], &str, usize, bool); 6] = [
            (&[], "a", 2, false),
            (&["a"], "a", 2, true),
            (&["a", "b"], "b", 2, true),
            (&["a", "b"], "a", 2, false),
            (&["a", "b", "c"], "c", 2, false),
            (&["b"], "a", 1, false),
        ];
        for (loaded, tool, capacity, nothing) in cases {
            assert_eq!(
                loaded_last(&set(loaded), tool, capacity),
                nothing,
                "{loaded:?} {tool} {capacity}"
            );
        }
    }
}
