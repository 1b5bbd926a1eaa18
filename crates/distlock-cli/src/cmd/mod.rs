//! One module per subcommand.

pub mod inventory;
pub mod list;
pub mod man;
pub mod run;
pub mod status;
pub mod top;
pub mod unlock;
