//! [`Subscriber`]: where the subscription hub connects, and the command connection it renames.

use std::sync::Arc;
use std::time::Duration;

use super::links::Links;
use super::Deliver;
use crate::conn::backend::Backend;

/// Where the subscription hub opens its connections, and how it names them.
#[derive(Clone)]
pub(crate) struct Subscriber {
    /// The command side: its deployment says where the subscriptions go, and it is named
    /// again after each reconnection of the hub (the restart or failover that broke the
    /// subscription connection broke the command connection too, and a reconnected
    /// connection has no name).
    command: Backend,
    /// The client's connection name ([`naming::connection_name`](crate::conn::naming::connection_name)).
    name: Arc<str>,
}

impl Subscriber {
    /// The hub's connections go to `command`'s deployment, each named `name`.
    pub(crate) fn new(command: Backend, name: Arc<str>) -> Subscriber {
        Subscriber { command, name }
    }

    /// Open the subscription connections (each named; see [`Deliver`]).
    pub(crate) async fn connect(
        &self,
        timeout: Duration,
        deliver: &Deliver,
    ) -> redis::RedisResult<Links> {
        self.command
            .deployment()
            .subscription_links(self.command.publish(), &self.name, timeout, deliver)
            .await
    }

    /// Changes whenever the server behind the subscriptions changes (a Sentinel failover):
    /// the hub then reconnects and wakes every waiter. `None` when it never changes.
    pub(crate) fn switches(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.command.deployment().switches()
    }

    /// Name the command connection again (`CLIENT SETNAME`, resent over a reconnecting
    /// connection by the usual rules): after the hub reconnected, the command connection has
    /// most likely reconnected too, without its name. Failures are logged at debug level.
    pub(crate) async fn rename_command_connection(&self) {
        let named = self
            .command
            .query::<()>(
                "name the command connection",
                redis::cmd("CLIENT").arg("SETNAME").arg(&*self.name),
            )
            .await;
        if let Err(e) = named {
            tracing::debug!(
                error = format_args!("{e:#}"),
                "CLIENT SETNAME failed; the command connection stays unnamed"
            );
        }
    }
}
