mod common;
mod meta_tools;
mod pipeline;
mod sessions;
