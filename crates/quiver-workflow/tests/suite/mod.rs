mod common;
mod restart;
mod semantics;
