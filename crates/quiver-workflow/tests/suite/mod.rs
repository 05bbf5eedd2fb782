mod common;
mod restart;
mod schedules;
mod semantics;
