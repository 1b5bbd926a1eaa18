//! [`PubSubMode`]: the public setting of which pub/sub carries wake-ups on a Cluster.

/// Which pub/sub carries wake-ups on a Redis Cluster.
///
/// Chosen with [`ClientBuilder::pubsub_mode`](crate::ClientBuilder::pubsub_mode).
///
/// Classic pub/sub (`PUBLISH`/`SUBSCRIBE`) is forwarded by a cluster to every node, so its
/// cost grows with the cluster; sharded pub/sub (`SPUBLISH`/`SSUBSCRIBE`, Redis 7) stays on
/// the master of the channel's hash slot. Redisson 3.22 and later use sharded pub/sub on a
/// Redis 7 cluster (its `shardedSubscriptionMode`, default AUTO), older Redisson classic; a
/// Java waiter only wakes on the kind its client subscribes to. Standalone and Sentinel
/// deployments always use classic pub/sub, as Redisson does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum PubSubMode {
    /// Sharded where every node supports it (`PUBSUB SHARDNUMSUB` answers), classic otherwise.
    ///
    /// Redisson's AUTO. The default.
    #[default]
    Auto,
    /// Classic pub/sub only (Redisson before 3.22, or `shardedSubscriptionMode` OFF).
    Classic,
    /// Sharded pub/sub only; connecting fails on servers without it.
    Sharded,
    /// Publish both ways and listen on both.
    ///
    /// It suits fleets whose Java clients are configured either way; each release costs a
    /// second publish.
    Both,
}
