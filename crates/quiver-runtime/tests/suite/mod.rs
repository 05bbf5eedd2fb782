mod common;
mod guarantees;
mod hooks;
mod meta_tools;
mod pipeline;
mod sandbox_refusal;
mod sessions;
mod skill_invokers;
