mod check;
mod harness;
mod generated;
mod runtime_driver;
