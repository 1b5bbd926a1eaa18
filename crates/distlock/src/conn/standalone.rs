//! A standalone server (`redis://`, `rediss://`): one multiplexed command connection that
//! reconnects with backoff (redis-rs `ConnectionManager`), and subscriptions on plain pub/sub
//! connections to the same server.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use super::naming;
use super::ConnectSettings;

/// One server: its command connection, and the client its pub/sub connections open with.
/// Cheap to clone (shared handles).
#[derive(Clone)]
pub(crate) struct Server {
    pub(crate) manager: ConnectionManager,
    pub(crate) client: Arc<redis::Client>,
}

impl Server {
    /// Open the command connection to the server of `client` (the caller bounds the whole
    /// connect), and name it (`CLIENT SETNAME`, see `naming.rs`).
    pub(crate) async fn connect(
        client: redis::Client,
        settings: &ConnectSettings,
    ) -> redis::RedisResult<Server> {
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(settings.connect_timeout))
            .set_response_timeout(Some(settings.command_timeout))
            .set_number_of_retries(2)
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_secs(2));
        let mut manager = client.get_connection_manager_with_config(config).await?;
        naming::set_name(&mut manager, &settings.client_name).await;
        Ok(Server {
            manager,
            client: Arc::new(client),
        })
    }
}
