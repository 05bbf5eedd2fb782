mod boundaries;
mod chat_loop;
mod common;
mod providers;
mod runtime_hooks;
mod subagents;
