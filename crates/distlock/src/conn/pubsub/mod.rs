//! Pub/sub: the subscription hub, the wake-up message format, and the hub's connections.

mod hub;
pub(crate) mod links;
mod shards;
pub(crate) mod subscriber;
mod wake;

pub(crate) use hub::{Hub, Subscription};
pub(crate) use wake::{HandedOff, Handler, Wake};
