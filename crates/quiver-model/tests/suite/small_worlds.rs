//! The small worlds the regression rows are built from: one item of each kind with nothing
//! restricted, and the catalogs several rows share.

use quiver_model::world::{
    Agent, Approval, Caller, Category, ListEntry, Package, Ref, Restrict, Role, Skill, Tool, World,
};

/// An exposed `perception` tool with `approval: never` and no restriction.
pub fn tool() -> Tool {
    Tool {
        expose: true,
        hidden: false,
        category: Category::Perception,
        approval: Approval::Never,
        dangerous: false,
        restrict: Restrict::None,
        secret: false,
    }
}

/// A skill with no restriction, no lists, no fork and no tools of its own.
pub fn skill() -> Skill {
    Skill {
        restrict: Restrict::None,
        tools: None,
        allowed: Vec::new(),
        disallowed: Vec::new(),
        fork: None,
        scoped: Vec::new(),
    }
}

/// An empty package.
pub fn package() -> Package {
    Package {
        tools: Vec::new(),
        root_skill: None,
        skills: Vec::new(),
        agents: Vec::new(),
        prompts: Vec::new(),
        workflows: Vec::new(),
    }
}

/// The owner, present, outside any group.
pub fn owner() -> Caller {
    Caller {
        role: Role::Master,
        in_qq_group: false,
        unattended: false,
    }
}

/// `p0` forks its skill into agent `a0` of `p1`, exposed or not.
pub fn fork_into_p1(expose: bool) -> World {
    let p0 = Package {
        root_skill: Some(Skill {
            fork: Some(Ref {
                package: 1,
                name: "a0".into(),
            }),
            ..skill()
        }),
        ..package()
    };
    let p1 = Package {
        agents: vec![Agent {
            expose,
            tools: Vec::new(),
        }],
        ..package()
    };
    World {
        packages: vec![p0, p1],
    }
}

/// `p0` with a skill `s0` whose own tool `s0k0` says `expose: true`, and (`root`) a root skill.
pub fn exposed_skill_tool(root: bool) -> World {
    World {
        packages: vec![Package {
            root_skill: root.then(skill),
            skills: vec![Skill {
                scoped: vec![tool()],
                ..skill()
            }],
            ..package()
        }],
    }
}

/// `p0` with one tool `t0`.
pub fn one_tool(t0: Tool) -> World {
    World {
        packages: vec![Package {
            tools: vec![t0],
            ..package()
        }],
    }
}

/// `p0` with an `approval: always` tool `t0` that its own skill pre-approves.
pub fn preapproved_always() -> World {
    World {
        packages: vec![Package {
            tools: vec![Tool {
                approval: Approval::Always,
                ..tool()
            }],
            root_skill: Some(Skill {
                allowed: vec![ListEntry::Qualified(Ref {
                    package: 0,
                    name: "t0".into(),
                })],
                ..skill()
            }),
            ..package()
        }],
    }
}
