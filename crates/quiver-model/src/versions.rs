//! Catalog versions under hot reload (docs/runtime.md, "Hot reload"): an edit of a package
//! swaps a new catalog in; a turn keeps the catalog it began with, the next turn sees the new.

use crate::world::World;

/// An edit of the catalog, as a person saves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Edit {
    /// Flip root tool `t` of package `p`'s `expose`.
    FlipExpose(usize, usize),
    /// Remove skill `s` of package `p` (later skills move up one).
    RemoveSkill(usize, usize),
    /// Remove the last package.
    RemovePackage,
    /// Add a package at the end.
    AddPackage(Box<crate::world::Package>),
}

impl Edit {
    /// `world` after the edit; an edit naming nothing there changes nothing.
    pub fn apply(&self, world: &World) -> World {
        let mut next = world.clone();
        match self {
            Edit::FlipExpose(p, t) => {
                if let Some(tool) = next.packages.get_mut(*p).and_then(|p| p.tools.get_mut(*t)) {
                    tool.expose = !tool.expose;
                }
            }
            Edit::RemoveSkill(p, s) => {
                if let Some(package) = next.packages.get_mut(*p)
                    && *s < package.skills.len()
                {
                    package.skills.remove(*s);
                }
            }
            Edit::RemovePackage => {
                if next.packages.len() > 1 {
                    next.packages.pop();
                }
            }
            Edit::AddPackage(package) => {
                if next.packages.len() < crate::generate::MAX_PACKAGES {
                    next.packages.push((**package).clone());
                    // Workflow steps name packages that exist, as generated worlds do.
                    let n = next.packages.len();
                    for step in next.packages.iter_mut().flat_map(|p| &mut p.workflows) {
                        for step in &mut step.steps {
                            if let crate::world::Step::Tool(r) | crate::world::Step::Agent(r) = step
                            {
                                r.package %= n;
                            }
                        }
                    }
                }
            }
        }
        next
    }
}

/// The catalogs of one conversation: every version swapped in, and the one the open turn
/// holds.
#[derive(Debug, Clone)]
pub struct Catalogs {
    versions: Vec<World>,
    turn: usize,
}

impl Catalogs {
    /// The first catalog, which the first turn holds.
    pub fn new(world: World) -> Catalogs {
        Catalogs {
            versions: vec![world],
            turn: 0,
        }
    }

    /// A reload swaps `edit`'s result in; the open turn keeps its catalog.
    pub fn swap(&mut self, edit: &Edit) {
        let next = edit.apply(self.latest());
        self.versions.push(next);
    }

    /// A new turn holds the newest catalog.
    pub fn new_turn(&mut self) {
        self.turn = self.versions.len() - 1;
    }

    /// The catalog the open turn sees.
    pub fn seen(&self) -> &World {
        &self.versions[self.turn]
    }

    /// The version the open turn holds (0: the first).
    pub fn held(&self) -> usize {
        self.turn
    }

    /// The newest catalog (what a turn begun now would see).
    pub fn latest(&self) -> &World {
        &self.versions[self.versions.len() - 1]
    }

    /// Every version, oldest first.
    pub fn versions(&self) -> &[World] {
        &self.versions
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_keeps_its_catalog_and_the_next_sees_the_new() {
        let world = World {
            packages: vec![Default::default(), Default::default()],
        };
        let mut c = Catalogs::new(world.clone());
        c.swap(&Edit::RemovePackage);
        assert_eq!(c.seen(), &world);
        assert_eq!(c.latest().packages.len(), 1);
        c.new_turn();
        assert_eq!(c.seen().packages.len(), 1);
    }
}
