//! One module per subcommand.

pub mod bench;
pub mod demo;
pub mod run;
pub mod status;
pub mod unlock;
