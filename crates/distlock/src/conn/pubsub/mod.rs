//! Pub/sub: one subscription hub per client (`hub.rs`), the wake-up message format
//! (`wake.rs`), where the hub connects (`subscriber.rs`) and its connections (`links.rs`:
//! classic; `shards.rs`: sharded, on a Cluster).

mod hub;
pub(crate) mod links;
mod shards;
mod subscriber;
mod wake;

pub(crate) use hub::{Hub, Subscription};
pub(crate) use subscriber::Subscriber;
pub(crate) use wake::{HandedOff, Handler, Wake};
