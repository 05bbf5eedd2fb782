mod common;
mod definition;
mod restart;
mod schedules;
mod semantics;
