mod bench;
mod common;
mod hostile;
mod install;
mod pack;
