//! `quiver.lock` and `skills-lock.json`.
