//! Connections set aside per master for grants confirmed by `WAIT` (which blocks its connection).

use std::sync::Arc;
use std::time::Duration;

use redis::aio::MultiplexedConnection;

use super::naming;
use super::ConnectSettings;

/// Connections set aside for grants confirmed by `WAIT` (which blocks its connection until
/// the replicas answer or the timeout passes), per master.
const GRANT_CONNECTIONS: usize = 4;

/// One set-aside connection for grants; opened on first use.
pub(crate) type GrantSlot = Arc<tokio::sync::Mutex<Option<MultiplexedConnection>>>;

/// Exclusive use of one grant connection; set it to `None` to have it reopened.
pub(crate) type GrantSlotGuard = tokio::sync::OwnedMutexGuard<Option<MultiplexedConnection>>;

/// The grant connections of one master, none opened yet.
pub(crate) fn grant_slots() -> Vec<GrantSlot> {
    (0..GRANT_CONNECTIONS)
        .map(|_| Arc::new(tokio::sync::Mutex::new(None)))
        .collect()
}

/// Take `slot` exclusively, opening its connection first when it has none, to the server
/// `client()` names (called only then; its response timeout leaves room for the `WAIT`).
/// Returns the connection and the guard that keeps the slot exclusive; the connection stays
/// for the next grant.
pub(crate) async fn open_grant_slot(
    slot: GrantSlot,
    client: impl FnOnce() -> Result<redis::Client, String>,
    settings: &ConnectSettings,
) -> Result<(MultiplexedConnection, GrantSlotGuard), String> {
    let mut conn = slot.lock_owned().await;
    if conn.is_none() {
        let client = client()?;
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(settings.connect_timeout))
            .set_response_timeout(Some(
                settings.command_timeout + settings.replica_ack_timeout,
            ));
        let mut opened = client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(|e| format!("a connection for grants: {e}"))?;
        naming::set_name(&mut opened, &settings.client_name).await;
        *conn = Some(opened);
    }
    let c = conn.as_ref().expect("opened above").clone();
    Ok((c, conn))
}

/// A connection set aside for one grant (held exclusively until `guard` drops), and the
/// confirmation to ask for after the grant: `WAIT` for `wanted` replicas, at most `timeout`.
pub(crate) struct SetAside {
    pub(crate) conn: MultiplexedConnection,
    pub(crate) wanted: u32,
    pub(crate) timeout: Duration,
    pub(crate) guard: GrantSlotGuard,
}
