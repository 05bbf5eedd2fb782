//! The small worlds the regression rows are built from: one item of each kind with nothing
//! restricted, and the catalogs several rows share.

use quiver_model::world::{
    Agent, Approval, Caller, Category, ListEntry, Package, Prompt, Ref, Restrict, Role, Skill,
    Step, Tool, Workflow, World,
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
        script: false,
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

/// A `tool:` step naming `p{package}.t0`.
pub fn step_t0(package: usize) -> Step {
    Step::Tool(Ref {
        package,
        name: "t0".into(),
    })
}

/// `p0` runs its exposed workflow `w0` of `steps` and has a private dangerous `t0`; `p1` has an
/// exposed `action` tool `t0` with `approval: always`.
pub fn workflow_of(steps: Vec<Step>) -> World {
    let p0 = Package {
        tools: vec![Tool {
            expose: false,
            dangerous: true,
            ..tool()
        }],
        workflows: vec![Workflow {
            expose: true,
            steps,
        }],
        ..package()
    };
    let p1 = one_tool(Tool {
        category: Category::Action,
        approval: Approval::Always,
        ..tool()
    });
    World {
        packages: vec![p0, p1.packages.into_iter().next().unwrap_or_else(package)],
    }
}

/// `p0` and `p1` each with a skill that carries a script (`scripts/go.sh`).
pub fn skills_with_scripts() -> World {
    let p = Package {
        root_skill: Some(Skill {
            script: true,
            ..skill()
        }),
        ..package()
    };
    World {
        packages: vec![p.clone(), p],
    }
}

/// `p0` with a skill whose written, empty `tools: []` unlocks none of its own private tool.
pub fn empty_tools_list() -> World {
    World {
        packages: vec![Package {
            skills: vec![Skill {
                tools: Some(Vec::new()),
                scoped: vec![Tool {
                    expose: false,
                    ..tool()
                }],
                ..skill()
            }],
            ..package()
        }],
    }
}

/// `p0`'s exposed agent `a0` declares `p1.t0`, a private tool of `p1`.
pub fn agent_naming_a_private_tool() -> World {
    let p0 = Package {
        agents: vec![Agent {
            expose: true,
            tools: vec![Ref {
                package: 1,
                name: "t0".into(),
            }],
        }],
        ..package()
    };
    let p1 = Package {
        tools: vec![Tool {
            expose: false,
            ..tool()
        }],
        ..package()
    };
    World {
        packages: vec![p0, p1],
    }
}

/// `p0`'s skill forks into its own private agent `a0`, which calls its package's private
/// `t0` and then `p1.t0`, an exposed tool of `p1`.
pub fn fork_into_own_agent() -> World {
    let r = |package: usize| Ref {
        package,
        name: "t0".into(),
    };
    let p0 = Package {
        tools: vec![Tool {
            expose: false,
            ..tool()
        }],
        root_skill: Some(Skill {
            fork: Some(Ref {
                package: 0,
                name: "a0".into(),
            }),
            ..skill()
        }),
        agents: vec![Agent {
            expose: false,
            tools: vec![r(0), r(1)],
        }],
        ..package()
    };
    World {
        packages: vec![p0, one_tool(tool()).packages.remove(0)],
    }
}

/// `p0`'s skill `s0` forks into `p0`'s own private agent `a0` and has a private tool `s0k0`.
pub fn skill_forking_with_its_own_tool() -> World {
    World {
        packages: vec![Package {
            skills: vec![Skill {
                fork: Some(Ref {
                    package: 0,
                    name: "a0".into(),
                }),
                scoped: vec![Tool {
                    expose: false,
                    ..tool()
                }],
                ..skill()
            }],
            agents: vec![Agent {
                expose: false,
                tools: Vec::new(),
            }],
            ..package()
        }],
    }
}

/// A skill whose `disallowed-tools` names `name` (in any package).
pub fn skill_removing(name: &str) -> Skill {
    Skill {
        disallowed: vec![ListEntry::Bare(name.into())],
        ..skill()
    }
}

/// `p0` with one `required` prompt section for every profile.
pub fn required_section() -> World {
    World {
        packages: vec![Package {
            prompts: vec![Prompt {
                required: true,
                profile: None,
            }],
            ..package()
        }],
    }
}
