//! Quiver's package model: every file of the package format parsed into typed values, with
//! diagnostics (severity, stable code, file, line, help) for everything that is wrong.
//!
//! The main entry point is [`load_package`], which reads one package folder and returns the
//! [`Package`] together with its diagnostics. Nothing here panics on input: a bad file becomes a
//! diagnostic and the rest of the package still loads.

pub mod agent;
pub mod check;
pub mod common;
pub mod content;
pub mod declarations;
pub mod diagnostic;
pub mod digest;
pub mod distribution;
pub mod env;
pub mod events;
pub mod foreign;
pub mod frontmatter;
pub mod limits;
pub mod manifest;
pub mod names;
pub mod package;
pub mod prompt;
pub mod requirements;
pub mod rules;
pub mod schema;
pub mod skill;
pub mod skill_files;
pub mod skill_lint;
/// Strict Agent Skills validation, twin of the reference skills-ref.
pub mod skills_ref;
pub mod source;
pub mod text;
pub mod tool;
mod unlocks;
pub mod workflow;
pub mod yaml;

pub use diagnostic::{Diagnostic, Severity};
pub use package::{Loaded, Package, is_package_dir, load_package};
