mod consent;
mod harness;
mod http;
mod http_gate;
mod runs;
mod skills;
mod switched_off;
mod tools;
