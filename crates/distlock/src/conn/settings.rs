//! [`ConnectSettings`]: what every connection distlock opens is opened with.

use std::sync::Arc;
use std::time::Duration;

use super::pubsub_mode::PubSubMode;

/// Connection settings the command side and the subscription hub share.
#[derive(Clone, Debug)]
pub(crate) struct ConnectSettings {
    pub connect_timeout: Duration,
    pub command_timeout: Duration,
    /// Replicas that must confirm a grant (`WAIT`) where the deployment has replicas; 0: off.
    pub replica_acks: u32,
    /// How long a grant waits for those confirmations.
    pub replica_ack_timeout: Duration,
    /// Classic or sharded pub/sub (Cluster only).
    pub pubsub: PubSubMode,
    /// The name every connection distlock opens gives itself (`CLIENT SETNAME`).
    ///
    /// `distlock:<app>:<host>:<pid>`.
    pub client_name: Arc<str>,
    /// The CA certificates (PEM) that `rediss://` servers are checked against instead of
    /// Mozilla's roots ([`crate::ClientBuilder::tls_ca_cert`]).
    pub tls_ca: Option<Arc<[u8]>>,
}
