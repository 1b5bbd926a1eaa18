//! The connection layer, and the seam between distlock and a Redis deployment.
//!
//! Every command, script and pipeline of a client goes through its [`Backend`]
//! (`backend.rs`: the resend rules), which sends over a [`Connection`]: a [`Deployment`]
//! (`deployment.rs`: standalone, Sentinel or Cluster, one method per question whose answer
//! differs between them) and a [`Route`] (shared, pinned to a grant connection, or
//! redirected by `ASK`). Each deployment's own behaviour is in `standalone.rs`,
//! `sentinel.rs` (a master found and followed through Redis Sentinel) and `cluster.rs`
//! (Redis Cluster). Grants and their confirmation by replicas are in `grant.rs` (the
//! connections set aside for them in `grant_slots.rs`); every subscription goes through the
//! [`pubsub::Hub`]. Scripts route by their first key (redis-rs's cluster client does so), and
//! every script's keys share the lock's hash slot.
//!
//! [`Deployment`]: deployment::Deployment
//! [`Route`]: deployment::Route

mod backend;
mod cluster;
mod deployment;
mod grant;
mod grant_slots;
pub(crate) mod naming;
pub(crate) mod pubsub;
mod pubsub_mode;
mod redact;
pub(crate) mod resend;
mod sentinel;
mod settings;
mod standalone;
mod target;
mod url;

pub(crate) use backend::Backend;
pub(crate) use deployment::Connection;
pub(crate) use grant::GrantChannel;
pub use pubsub_mode::PubSubMode;
pub use redact::redact_url;
pub(crate) use resend::Resend;
pub(crate) use settings::ConnectSettings;
pub(crate) use target::Target;
