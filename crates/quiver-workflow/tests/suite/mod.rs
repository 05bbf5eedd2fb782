mod common;
mod definition;
mod restart;
mod scheduler;
mod schedules;
mod semantics;
