//! Who a case plays besides the conversation: the person, who answers consent and approvals as
//! the conversation says and keeps every card, and the sub-agents, played by a runner that
//! calls every tool an agent declares in a child session, as its model would.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use quiver_model::world::{Target, World};
use quiver_runtime::Runtime;
use quiver_runtime::approver::{Answer, Approver, Card, Question};
use quiver_runtime::runtime::{AgentReply, AgentRunner, AgentTask};

use super::harness::arguments;

/// Answers consent and approvals as the conversation says, and keeps every card.
#[derive(Default)]
pub struct Person {
    pub consent_no: AtomicBool,
    pub approval_no: AtomicBool,
    pub cards: Mutex<Vec<Card>>,
}

impl Approver for Person {
    fn decide(&self, card: &Card) -> Answer {
        self.cards.lock().unwrap().push(card.clone());
        let no = match card.question {
            Question::Consent => self.consent_no.load(Ordering::SeqCst),
            Question::Approval => self.approval_no.load(Ordering::SeqCst),
        };
        match (no, card.question) {
            (true, _) => Answer::Deny,
            (false, Question::Consent) => Answer::AllowForSession,
            (false, Question::Approval) => Answer::Allow,
        }
    }
}

/// A run handed to the agent loop.
#[derive(Debug, Clone)]
pub struct Task {
    pub agent: Option<String>,
    pub skill: Option<String>,
    pub parent: String,
}

/// Plays sub-agents: records each task, and for an agent of the world calls every tool it
/// declares, in a child session, as its model would.
pub struct Runner {
    /// The catalog the turns that call agents hold (a reload's new turn: the new one).
    pub world: Mutex<World>,
    pub tasks: Mutex<Vec<Task>>,
    /// Child sessions, with the package whose agent runs in them.
    pub children: Mutex<BTreeMap<String, usize>>,
}

impl Runner {
    /// Plays the agents of `world` from now on: the catalog a new turn holds after a reload.
    pub fn follow(&self, world: &World) {
        world.clone_into(&mut self.world.lock().unwrap());
    }
}

impl AgentRunner for Runner {
    fn run(&self, runtime: &Runtime, task: AgentTask) -> Result<AgentReply, String> {
        let world = self.world.lock().unwrap().clone();
        self.tasks.lock().unwrap().push(Task {
            agent: task.agent.clone(),
            skill: task.skill.clone(),
            parent: task.parent_session.clone(),
        });
        let Some(agent) = task.agent.as_deref() else {
            return Ok(reply("fork", "done"));
        };
        let Some(target) = world
            .resolve(agent)
            .filter(|t| matches!(t, Target::Agent(..)))
        else {
            return Err(format!("no such agent: {agent}"));
        };
        if self
            .children
            .lock()
            .unwrap()
            .contains_key(&task.parent_session)
        {
            // One level of sub-agents is enough to see every rule.
            return Ok(reply("nested", "done"));
        }
        let child = runtime
            .create_child_session(&task.parent_session, agent, &task.sender)
            .map_err(|e| e.to_string())?;
        self.children
            .lock()
            .unwrap()
            .insert(child.clone(), target.package());
        let mut turn = runtime
            .begin_turn(&child, task.sender.clone(), &task.task)
            .map_err(|e| e.to_string())?;
        if let Some(person) = task.person.clone() {
            turn.set_person(person);
        }
        let declared = world
            .agent(&target)
            .map(|a| a.tools.clone())
            .unwrap_or_default();
        for r in declared {
            let args = arguments(&world, world.resolve(&r.qualified()).as_ref());
            turn.call(&r.qualified(), args).map_err(|e| e.to_string())?;
        }
        drop(turn);
        runtime.end_session(&child).map_err(|e| e.to_string())?;
        Ok(reply(&child, "done"))
    }
}

pub fn reply(session: &str, text: &str) -> AgentReply {
    AgentReply {
        session: session.to_owned(),
        reply: text.to_owned(),
    }
}
