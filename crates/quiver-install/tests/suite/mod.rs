mod bench;
mod common;
mod hostile;
mod index;
mod install;
mod pack;
mod python_env;
mod wheel;
