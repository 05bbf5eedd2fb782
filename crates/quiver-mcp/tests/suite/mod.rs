mod consent;
mod harness;
mod http;
mod http_gate;
mod skills;
mod tools;
