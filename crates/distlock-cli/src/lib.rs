//! The parts of the `distlock` command that its binary and the project's unpublished
//! benchmark and demo crate (`distlock-bench`) share: the connection arguments, the exit
//! codes and the output helpers. Not a stable API: use the `distlock` library.

// Doc comments of the arguments are also their `--help` text, written for a terminal
// (`[user][:password@]` is not a link, `<env>` not a tag).
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

pub mod args;
pub mod connect;
pub mod exit;
pub mod out;

pub use args::{parse_duration, parse_wait, ConnectionArgs};
