//! Pub/sub: the subscription hub, the wake-up message format, and the hub's connections.

mod channel;
mod hub;
pub(crate) mod links;
mod shards;
pub(crate) mod subscriber;
mod wake;

pub(crate) use hub::{Hub, Subscription};
pub(crate) use wake::{HandedOff, Handler, Wake};

/// Delivers a publication (channel, payload) where it is awaited, from the connection's own
/// reader: over RESP3 a message reaches its waiter without a hop through the hub task.
pub(crate) type Deliver = std::sync::Arc<dyn Fn(&[u8], &[u8]) + Send + Sync>;
