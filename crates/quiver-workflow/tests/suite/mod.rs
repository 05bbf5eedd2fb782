mod common;
mod definition;
mod leases;
mod restart;
mod scheduler;
mod schedules;
mod semantics;
