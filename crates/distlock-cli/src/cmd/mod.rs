//! One module per subcommand.

pub mod demo;
pub mod run;
pub mod status;
pub mod unlock;
