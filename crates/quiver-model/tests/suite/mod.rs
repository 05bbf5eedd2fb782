mod check;
mod generated;
mod runtime_driver;
