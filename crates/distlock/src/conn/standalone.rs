//! A standalone server (`redis://`, `rediss://`): one multiplexed command connection that
//! reconnects with backoff (redis-rs `ConnectionManager`), and subscriptions on plain pub/sub
//! connections to the same server.

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use super::ConnectSettings;

/// Open the command connection of a standalone server (the caller bounds the whole connect),
/// and name it (`CLIENT SETNAME`, see `naming.rs`).
pub(super) async fn connect(
    client: &redis::Client,
    settings: &ConnectSettings,
) -> redis::RedisResult<ConnectionManager> {
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(settings.connect_timeout))
        .set_response_timeout(Some(settings.command_timeout))
        .set_number_of_retries(2)
        .set_min_delay(Duration::from_millis(50))
        .set_max_delay(Duration::from_secs(2));
    let mut manager = client.get_connection_manager_with_config(config).await?;
    super::naming::set_name(&mut manager, &settings.client_name).await;
    Ok(manager)
}
