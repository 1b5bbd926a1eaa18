//! One shared subscription connection per client, with one server subscription per channel
//! however many local waiters want it.
//!
//! Waiters hold a [`Subscription`]; the first one for a channel makes the hub task send
//! `SUBSCRIBE`, the last one to drop makes it send `UNSUBSCRIBE`. Messages are delivered
//! through a [`tokio::sync::Notify`] per channel: message `0` (Redisson's unlock message)
//! wakes one waiter, `1` wakes all. Over RESP3 the connection's reader delivers each message
//! itself (`Deliver`), one task hop fewer on the way to a handed-off waiter than through the
//! hub task, which still handles subscriptions and RESP2. When the connection breaks, the hub
//! reconnects with backoff, subscribes again to every channel that still has waiters, and
//! wakes every waiter so that each retries at once (a release during the outage published to
//! nobody).
//!
//! The hub connects at start and stays connected even with no subscriptions: its connection
//! is how the client learns at once that the server went away (a restart closes it). Every
//! reconnection after the first is signalled on `reconnected`, so the watchdog checks every
//! held lease right away instead of at its next renewal.
//!
//! A server whose ACL denies the channel (`NOPERM`, a Redis 7 user without `&<channel>`
//! rights) leaves that channel *denied*: its waiters poll instead of waiting for messages,
//! the problem is logged once per client, and the connection is not torn down (which would
//! only loop).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, watch, Notify};

use super::channel::{Channel, GrantSlot, GrantWatch};
use super::links::{Conn, Event};
use super::subscriber::Subscriber;
use super::wake::{Handler, Wake};
use super::Deliver;

#[derive(Default)]
struct Shared {
    /// Channel name → (local subscriber count, channel).
    channels: Mutex<HashMap<String, (usize, Arc<Channel>)>>,
    /// Whether a refused subscription was logged already (once per client): a wake-up
    /// channel's, and a notice channel's.
    denial_logged: AtomicBool,
    notice_denial_logged: AtomicBool,
}

impl Shared {
    /// The local end of `name`, if any waiter wants it.
    fn channel(&self, name: &str) -> Option<Arc<Channel>> {
        self.channels
            .lock()
            .unwrap()
            .get(name)
            .map(|(_, c)| c.clone())
    }
}

enum Cmd {
    /// Make the server's subscription state for this channel match the local one (the
    /// channel's `confirmed` says when the server answered).
    Sync(String),
}

/// The subscription hub of one client.
pub(crate) struct Hub {
    shared: Arc<Shared>,
    tx: mpsc::UnboundedSender<Cmd>,
    task: tokio::task::AbortHandle,
}

impl Drop for Hub {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A local waiter's interest in a channel. Dropping it unsubscribes when it was the last.
pub(crate) struct Subscription {
    shared: Arc<Shared>,
    tx: mpsc::UnboundedSender<Cmd>,
    name: String,
    channel: Arc<Channel>,
}

impl Subscription {
    /// The channel's wake-ups.
    pub(crate) fn channel(&self) -> &Channel {
        &self.channel
    }

    /// Deliver hand-offs to `owner` on this (grant) channel to the returned watch.
    pub(crate) fn expect_grant(&self, owner: &str) -> GrantWatch {
        let slot = Arc::new(GrantSlot::default());
        self.channel
            .grants
            .lock()
            .unwrap()
            .insert(owner.to_string(), slot.clone());
        GrantWatch {
            channel: self.channel.clone(),
            owner: owner.to_string(),
            slot,
        }
    }

    /// Wait until the server confirmed the channel's subscription, at most `limit`: whoever
    /// of the local subscribers asked for it. Returns whether it is usable; a waiter that
    /// goes on without confirmation still makes progress through its bounded waits, only
    /// slower.
    pub(crate) async fn ready(&self, limit: Duration) -> bool {
        let mut confirmed = self.channel.confirmed.subscribe();
        let answered = tokio::time::timeout(limit, confirmed.wait_for(Option::is_some)).await;
        let usable = matches!(answered, Ok(Ok(ref c)) if **c == Some(true));
        usable
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let last = {
            let mut map = self.shared.channels.lock().unwrap();
            match map.get_mut(&self.name) {
                Some((refs, ch)) if Arc::ptr_eq(ch, &self.channel) => {
                    *refs -= 1;
                    if *refs == 0 {
                        map.remove(&self.name);
                        true
                    } else {
                        false
                    }
                }
                _ => false,
            }
        };
        if last {
            let _ = self.tx.send(Cmd::Sync(std::mem::take(&mut self.name)));
        }
    }
}

impl Hub {
    /// Start the hub task on the current runtime; it connects at once and reconnects with
    /// backoff (20 ms doubling to 200 ms) whenever the connection closes, signalling
    /// `reconnected` each time after the first.
    pub(crate) fn start(
        subscriber: Subscriber,
        connect_timeout: Duration,
        reconnected: Arc<Notify>,
    ) -> Hub {
        let shared = Arc::new(Shared::default());
        let (tx, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(run(
            subscriber,
            connect_timeout,
            shared.clone(),
            rx,
            reconnected,
        ))
        .abort_handle();
        Hub { shared, tx, task }
    }

    /// Stop the hub task and close its connection (client shutdown), waking every local
    /// waiter so that each re-checks at once (and finds the client closed) instead of
    /// napping until its next bound.
    pub(crate) fn stop(&self) {
        self.task.abort();
        wake_everyone(&self.shared);
    }

    /// Register interest in `name`; the returned subscription is usable at once and
    /// [`Subscription::ready`] waits for the server's confirmation.
    pub(crate) fn subscribe(&self, name: &str, wake: Wake) -> Subscription {
        self.subscribe_with(name, wake, None)
    }

    /// Run `handler` for every message on `name` ([`Wake::Notice`]) for as long as the
    /// returned subscription lives (across reconnections, as every subscription).
    pub(crate) fn listen(&self, name: &str, handler: Handler) -> Subscription {
        self.subscribe_with(name, Wake::Notice, Some(handler))
    }

    fn subscribe_with(&self, name: &str, wake: Wake, handler: Option<Handler>) -> Subscription {
        let (channel, first) = {
            let mut map = self.shared.channels.lock().unwrap();
            let entry = map.entry(name.to_string()).or_insert_with(|| {
                (
                    0,
                    Arc::new(Channel {
                        notify: Notify::new(),
                        wake,
                        denied: AtomicBool::new(false),
                        grants: Mutex::default(),
                        handler,
                        confirmed: watch::Sender::new(None),
                    }),
                )
            });
            entry.0 += 1;
            (entry.1.clone(), entry.0 == 1)
        };
        if first {
            let _ = self.tx.send(Cmd::Sync(name.to_string()));
        }
        Subscription {
            shared: self.shared.clone(),
            tx: self.tx.clone(),
            name: name.to_string(),
            channel,
        }
    }
}

async fn connect(subscriber: &Subscriber, timeout: Duration, deliver: &Deliver) -> Option<Conn> {
    match tokio::time::timeout(timeout, subscriber.connect(timeout, deliver)).await {
        Ok(Ok(links)) => Some(Conn::new(links)),
        Ok(Err(e)) => {
            tracing::debug!(
                error = format_args!("{e:#}"),
                "subscription connection failed"
            );
            None
        }
        Err(_) => {
            tracing::debug!("subscription connection timed out");
            None
        }
    }
}

/// Bring the server's subscription for `name` in line with the local map. Returns whether
/// the channel is usable (false when the server's ACL refused it). An `Err` means the
/// connection broke.
async fn reconcile(conn: &mut Conn, shared: &Shared, name: &str) -> redis::RedisResult<bool> {
    let wanted = shared.channel(name);
    if let Some(channel) = &wanted {
        if conn.has(name) {
            channel.confirm(true);
            return Ok(true);
        }
        if channel.is_denied() {
            channel.confirm(false);
            return Ok(false);
        }
        match conn.subscribe(name).await {
            Ok(()) => channel.confirm(true),
            Err(e) if is_noperm(&e) => {
                channel.denied.store(true, Ordering::Relaxed);
                channel.confirm(false);
                denied_warning(shared, name);
                return Ok(false);
            }
            Err(e) => return Err(e),
        }
    } else if conn.has_any(name) {
        conn.unsubscribe(name).await?;
    }
    Ok(true)
}

/// The one WARN of a client whose ACL denies a channel, saying what is lost: the notice
/// channel's denial leaves force unlocks (of locks and job locks) to be learnt at the next
/// renewal or check instead of at once; a wake-up channel's leaves waiters polling.
fn denied_warning(shared: &Shared, name: &str) {
    let (what, pattern, flag) = if name.starts_with("distlock_client:") {
        (
            "lost-lease notices: a force unlock of this client's holds fires their lost() \
             only at the next renewal (a job lock's at its next check, a third of \
             at_most_for) instead of at once",
            "&distlock_client:*",
            &shared.notice_denial_logged,
        )
    } else {
        (
            "wake-ups: this client's waiters poll instead of waiting for messages, and its \
             releases wake nobody",
            "the channel's pattern",
            &shared.denial_logged,
        )
    };
    if !flag.swap(true, Ordering::Relaxed) {
        let err = crate::error::Error::new(
            crate::error::ErrorKind::NoPermission,
            format!(
                "subscribe to {name:?}: the server's ACL denies the channel (the user needs \
                 {pattern} or &*)"
            ),
        );
        tracing::warn!(error = %err, "no {what}");
    }
}

/// A refusal by the server's ACL (not a broken connection).
fn is_noperm(e: &redis::RedisError) -> bool {
    e.code() == Some("NOPERM") || e.to_string().contains("NOPERM")
}

fn wake_everyone(shared: &Shared) {
    let channels: Vec<Arc<Channel>> = shared
        .channels
        .lock()
        .unwrap()
        .values()
        .map(|(_, c)| c.clone())
        .collect();
    for c in channels {
        c.wake_all();
    }
}

/// Longest pause between two connection attempts of the hub.
/// Short: after a failover every waiter depends on the resubscription (a release published
/// before it reaches nobody), and a refused connection costs next to nothing.
const MAX_BACKOFF: Duration = Duration::from_millis(200);
const MIN_BACKOFF: Duration = Duration::from_millis(20);

async fn run(
    subscriber: Subscriber,
    connect_timeout: Duration,
    shared: Arc<Shared>,
    mut rx: mpsc::UnboundedReceiver<Cmd>,
    reconnected: Arc<Notify>,
) {
    let mut conn: Option<Conn> = None;
    let mut connected_before = false;
    // A failover (Sentinel) moves the subscriptions to the new master.
    let mut switches = subscriber.switches();
    let mut backoff = MIN_BACKOFF;
    // A message read over RESP3 wakes its waiter from the connection's reader.
    let deliver: Deliver = {
        let shared = shared.clone();
        Arc::new(move |name: &[u8], payload: &[u8]| {
            if let Some(channel) = std::str::from_utf8(name)
                .ok()
                .and_then(|n| shared.channel(n))
            {
                channel.wake(payload);
            }
        })
    };
    loop {
        if conn.is_none() {
            match connect(&subscriber, connect_timeout, &deliver).await {
                Some(mut c) => {
                    let names: Vec<String> =
                        shared.channels.lock().unwrap().keys().cloned().collect();
                    let mut ok = true;
                    for name in &names {
                        if reconcile(&mut c, &shared, name).await.is_err() {
                            ok = false;
                            break;
                        }
                    }
                    if !ok {
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(MAX_BACKOFF);
                        continue;
                    }
                    backoff = MIN_BACKOFF;
                    conn = Some(c);
                    if connected_before {
                        // The server may have restarted or failed over: have held leases
                        // checked now, not at their next renewal.
                        reconnected.notify_one();
                        // The command connection reconnects without its name: give it again.
                        let subscriber = subscriber.clone();
                        tokio::spawn(async move { subscriber.rename_command_connection().await });
                    }
                    connected_before = true;
                    // Whatever was released while we were away published to nobody.
                    wake_everyone(&shared);
                }
                None => {
                    if backoff == MIN_BACKOFF {
                        tracing::warn!("subscription connection failed; retrying");
                    }
                    // Let waiters fall back to their bounded waits meanwhile.
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    // The next connection subscribes to every local channel: requests made
                    // meanwhile are answered by it.
                    loop {
                        match rx.try_recv() {
                            Ok(Cmd::Sync(_)) => {}
                            Err(mpsc::error::TryRecvError::Empty) => break,
                            Err(mpsc::error::TryRecvError::Disconnected) => return,
                        }
                    }
                    continue;
                }
            }
        }
        let c = conn.as_mut().expect("connected");
        tokio::select! {
            cmd = rx.recv() => {
                let Some(Cmd::Sync(name)) = cmd else { return };
                if let Err(e) = reconcile(c, &shared, &name).await {
                    // The client was dropped meanwhile (its connections go with it): nothing
                    // broke that anyone still needs.
                    if rx.is_closed() {
                        return;
                    }
                    // The next connection subscribes to every local channel, this one too.
                    tracing::warn!(error = format_args!("{e:#}"), "subscription connection broke");
                    conn = None;
                }
            }
            changed = async {
                match switches.as_mut() {
                    Some(w) => w.changed().await,
                    None => std::future::pending().await,
                }
            } => {
                if changed.is_err() {
                    switches = None;
                } else {
                    tracing::info!("the server changed (failover): resubscribing on the new one");
                    // Reconnect: the new connection subscribes to every channel again, and
                    // every waiter is woken to check at once.
                    conn = None;
                }
            }
            event = c.next() => {
                match event {
                    Event::Message(name, payload) => {
                        if let Some(channel) = shared.channel(&name) {
                            channel.wake(&payload);
                        }
                    }
                    Event::Resync(names) => {
                        for name in names {
                            if let Err(e) = reconcile(c, &shared, &name).await {
                                tracing::warn!(error = format_args!("{e:#}"), "resubscribing failed; reconnecting");
                                conn = None;
                                break;
                            }
                            // A release may have been published where nobody listened.
                            if let Some(channel) = shared.channel(&name) {
                                channel.wake_all();
                            }
                        }
                    }
                    Event::Closed => {
                        if rx.is_closed() {
                            return;
                        }
                        tracing::warn!("subscription connection closed; reconnecting");
                        conn = None;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use distlock_test::RedisServer;

    use super::{Hub, Wake};
    use crate::conn::backend::Backend;
    use crate::conn::target::Target;
    use crate::conn::ConnectSettings;
    use crate::conn::PubSubMode;

    /// A second local subscriber that subscribes while the first's `SUBSCRIBE` is still in
    /// flight is not ready before the server is subscribed: a message published to it then
    /// (a hand-off) would reach nobody.
    #[tokio::test]
    async fn every_local_subscriber_waits_for_the_servers_confirmation() {
        let server = RedisServer::start();
        let settings = ConnectSettings {
            connect_timeout: Duration::from_secs(5),
            command_timeout: Duration::from_secs(3),
            replica_acks: 0,
            replica_ack_timeout: Duration::from_secs(1),
            pubsub: PubSubMode::Auto,
            client_name: "distlock:test".into(),
            tls_ca: None,
            functions: true,
        };
        let target = Target::parse(&server.url(), None, None).unwrap();
        let (_backend, subscriber) = Backend::connect(target, &settings, "test").await.unwrap();
        let hub = Hub::start(subscriber, settings.connect_timeout, Arc::default());
        let mut conn = server.connection();
        for i in 0..20 {
            let name = format!("ready:{i}");
            let first = hub.subscribe(&name, Wake::Grant);
            let second = hub.subscribe(&name, Wake::Grant);
            assert!(second.ready(Duration::from_secs(5)).await);
            let (_, subscribers): (String, i64) = redis::cmd("PUBSUB")
                .arg("NUMSUB")
                .arg(&name)
                .query(&mut conn)
                .unwrap();
            assert_eq!(subscribers, 1, "{name}: ready before the server subscribed");
            assert!(first.ready(Duration::from_secs(5)).await);
        }
    }
}
