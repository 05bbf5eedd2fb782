mod common;
mod definition;
mod leases;
mod pins;
mod restart;
mod scheduler;
mod schedules;
mod semantics;
