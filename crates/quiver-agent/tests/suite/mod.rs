mod chat_loop;
mod common;
mod providers;
mod subagents;
