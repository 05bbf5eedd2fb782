//! Quiver's catalog: scanning roots for packages, the immutable [`Catalog`] snapshot with
//! qualified and wire names, rendering for the model, the collision lint, and search.
//!
//! ```no_run
//! use quiver_catalog::Catalog;
//! let catalog = Catalog::load_dirs(&[std::path::Path::new("examples/packages")]);
//! for found in catalog.search("北京明天多少度", 5, &|_| true) {
//!     println!("{} {:.2}", found.entry.id, found.score);
//! }
//! ```

pub mod catalog;
pub mod examples;
pub mod lint;
pub mod load_bench;
pub mod mcp_listing;
pub mod params;
pub mod render;
pub mod scan;
pub mod wire;

/// The tool-retrieval benchmark behind `quiver bench retrieval`.
pub mod bench;
/// The `tool_search` index: bilingual BM25F over packages, tools, agents, skills and built-ins.
pub mod search;

pub use catalog::{
    BuiltinTool, Catalog, CatalogOptions, CatalogPackage, Entry, EntryKind, Item, ItemKind,
};
pub use scan::{Root, Scope};
