mod consent;
mod harness;
mod http;
mod skills;
mod tools;
