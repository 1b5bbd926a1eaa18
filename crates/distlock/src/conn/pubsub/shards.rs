//! Sharded pub/sub on Redis Cluster (`SSUBSCRIBE`, Redis 7): one dedicated RESP3 connection per
//! master, each channel subscribed on the master of its hash slot, as Redisson 3.22+ does on
//! a Redis 7 cluster — so Java and Rust waiters wake each other there.
//!
//! redis-rs's cluster client can `SSUBSCRIBE`, but takes a `sunsubscribe` that the *server*
//! sends (its node lost the slot: failover, slot migration) for the client's own and never
//! subscribes again, and has no periodic topology refresh. So distlock keeps its own slot map
//! (`CLUSTER SLOTS`, refreshed every [`REFRESH_EVERY`], after a redirect and after any
//! subscription was dropped) and its own record of which node holds which subscription:
//! - a server-sent `sunsubscribe` for a channel still wanted, a node connection that closed,
//!   or a refresh that finds a channel's slot on another master all make the hub subscribe
//!   that channel again (on the slot's master now) and wake its waiters, since a release may
//!   have been published where nobody listened;
//! - a `MOVED` answer to `SSUBSCRIBE` refreshes the map and tries again;
//! - a channel whose master cannot be reached (it failed, and the cluster has not promoted
//!   its replica yet) stays pending and is tried again every [`RETRY_EVERY`], without
//!   touching the subscriptions on the other masters.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{PushInfo, PushKind, Value};
use tokio::sync::mpsc;

use super::Deliver;
use crate::conn::cluster::slots::{
    fetch_slots, io_error, node_client, Addr, SlotMap, REFRESH_EVERY,
};
use crate::conn::naming;
use crate::keys::key_slot;

/// How often channels whose subscription failed are tried again.
const RETRY_EVERY: Duration = Duration::from_millis(200);

/// The sharded subscriptions of one client (driven by the subscription hub).
pub(crate) struct Shards {
    /// Connection settings (auth, TLS) of the seed nodes; each node connection copies the
    /// first one's with the node's address.
    seeds: Arc<Vec<redis::Client>>,
    timeout: Duration,
    /// The client's connection name, given to every node connection (`CLIENT SETNAME`).
    name: Arc<str>,
    map: SlotMap,
    nodes: HashMap<Addr, MultiplexedConnection>,
    /// Channel → the node it is subscribed on.
    subscribed: HashMap<String, Addr>,
    /// Channels wanted but not subscribed now (their master cannot be reached, or the
    /// cluster serves their slot nowhere yet): tried again every [`RETRY_EVERY`], so one
    /// failed master does not hold up the others' subscriptions.
    pending: HashSet<String>,
    /// Read the slot map before the next subscription (a node dropped subscriptions or
    /// closed). Set instead of reading it at once so that [`Shards::next`] never awaits
    /// after changing state (it is cancelled whenever the hub has something else to do).
    stale: bool,
    tx: mpsc::UnboundedSender<(Addr, PushInfo)>,
    rx: mpsc::UnboundedReceiver<(Addr, PushInfo)>,
    /// Where each node connection's reader delivers the messages it reads.
    deliver: Deliver,
    refresh: tokio::time::Interval,
}

impl Shards {
    /// Read the slot map from the first seed (or known node) that answers; no subscription
    /// yet. Node connections, opened on first use, are named `name`; their readers deliver
    /// each message to `deliver`.
    pub(crate) async fn open(
        seeds: Arc<Vec<redis::Client>>,
        timeout: Duration,
        name: Arc<str>,
        deliver: Deliver,
    ) -> redis::RedisResult<Shards> {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut refresh = tokio::time::interval(REFRESH_EVERY);
        refresh.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        refresh.reset();
        let mut shards = Shards {
            seeds,
            timeout,
            name,
            map: SlotMap::default(),
            nodes: HashMap::new(),
            subscribed: HashMap::new(),
            pending: HashSet::new(),
            stale: false,
            tx,
            rx,
            deliver,
            refresh,
        };
        shards.refresh_map().await?;
        Ok(shards)
    }

    /// Whether `channel` is subscribed (on the node that held its slot when it was), or
    /// waits for its next try ([`Shards::subscribe`]).
    pub(crate) fn has(&self, channel: &str) -> bool {
        self.subscribed.contains_key(channel) || self.pending.contains(channel)
    }

    /// Subscribe `channel` on its slot's master. Only an ACL refusal (`NOPERM`) is returned;
    /// any other failure leaves the channel pending, tried again within [`RETRY_EVERY`]
    /// (its waiters are woken then, and poll by their bounded waits meanwhile).
    pub(crate) async fn subscribe(&mut self, channel: &str) -> redis::RedisResult<()> {
        match self.try_subscribe(channel).await {
            Ok(()) => {
                self.pending.remove(channel);
                Ok(())
            }
            Err(e) if e.code() == Some("NOPERM") || e.to_string().contains("NOPERM") => Err(e),
            Err(e) => {
                tracing::debug!(%channel, error = format_args!("{e:#}"), "sharded subscription failed; retrying");
                self.stale = true;
                self.pending.insert(channel.to_string());
                Ok(())
            }
        }
    }

    /// `SSUBSCRIBE channel` on its slot's master; after a `MOVED` answer the map is read
    /// again and the subscription tried once more.
    async fn try_subscribe(&mut self, channel: &str) -> redis::RedisResult<()> {
        if self.stale {
            self.refresh_map().await?;
            self.stale = false;
        }
        let mut attempt = 0;
        loop {
            let addr = self.owner(channel)?;
            let reply = match self
                .send(&addr, redis::cmd("SSUBSCRIBE").arg(channel))
                .await
            {
                Err(e) if attempt == 0 && is_redirect(&e) => {
                    attempt += 1;
                    self.refresh_map().await?;
                    continue;
                }
                r => r?,
            };
            match reply {
                Value::Push {
                    kind: PushKind::SSubscribe,
                    ref data,
                } if data.first().and_then(bytes) == Some(channel.as_bytes()) => {
                    self.subscribed.insert(channel.to_string(), addr);
                    return Ok(());
                }
                other => {
                    // A server-sent push taken for this request's answer: the connection's
                    // request order is lost; open it again.
                    self.drop_node(&addr);
                    return Err(io_error(format!(
                        "unexpected answer to SSUBSCRIBE: {other:?}"
                    )));
                }
            }
        }
    }

    /// `SUNSUBSCRIBE channel` on the node it is subscribed on (nothing when that node is
    /// gone: its subscriptions went with it).
    pub(crate) async fn unsubscribe(&mut self, channel: &str) -> redis::RedisResult<()> {
        self.pending.remove(channel);
        let Some(addr) = self.subscribed.remove(channel) else {
            return Ok(());
        };
        if self.nodes.contains_key(&addr) {
            // A node that fails here took the subscription with it (its connection is
            // dropped by `send`).
            if let Err(e) = self
                .send(&addr, redis::cmd("SUNSUBSCRIBE").arg(channel))
                .await
            {
                tracing::debug!(%channel, node = %addr, error = format_args!("{e:#}"), "SUNSUBSCRIBE failed");
            }
        }
        Ok(())
    }

    /// The next channels to subscribe again and wake: they lost their subscription, or it is
    /// on the wrong node now. (Messages never come out here: each node connection's reader
    /// delivers them, see `connect`.)
    ///
    /// Cancel safe: the hub drops it whenever it has something else to do, so every state
    /// change here comes with the event it returns, with no `.await` in between (the map
    /// refresh of the periodic branch changes nothing until it has the new map).
    pub(crate) async fn next(&mut self) -> Vec<String> {
        loop {
            let retry = !self.pending.is_empty();
            tokio::select! {
                push = self.rx.recv() => {
                    // `self.tx` lives as long as `self`: the channel never closes.
                    let Some((addr, push)) = push else { continue };
                    if let Some(lost) = self.on_push(addr, push) {
                        return lost;
                    }
                }
                _ = tokio::time::sleep(RETRY_EVERY), if retry => {
                    let again: Vec<String> = self.pending.drain().collect();
                    return again;
                }
                _ = self.refresh.tick() => {
                    if self.refresh_map().await.is_err() {
                        continue;
                    }
                    let moved = self.take_where(|shards, channel, addr| {
                        shards.owner(channel).ok().as_ref() != Some(addr)
                    });
                    if !moved.is_empty() {
                        tracing::info!(channels = moved.len(), "slots moved: subscribing on their new masters");
                        return moved;
                    }
                }
            }
        }
    }

    /// The channels a push other than a message (delivered by the reader) says to subscribe
    /// again, if any.
    fn on_push(&mut self, addr: Addr, push: PushInfo) -> Option<Vec<String>> {
        match push.kind {
            PushKind::SUnsubscribe => {
                // Our own SUNSUBSCRIBE forgot the channel (or moved it) first; a channel
                // still recorded on this node was dropped by the server.
                let channel = push
                    .data
                    .first()
                    .and_then(bytes)
                    .map(|b| String::from_utf8_lossy(b).into_owned())?;
                if self.subscribed.get(&channel) != Some(&addr) {
                    return None;
                }
                self.subscribed.remove(&channel);
                tracing::info!(%channel, node = %addr, "the server dropped a sharded subscription (failover or slot migration); subscribing again");
                self.stale = true;
                Some(vec![channel])
            }
            PushKind::Disconnection => {
                self.nodes.remove(&addr);
                let lost = self.take_where(|_, _, on| *on == addr);
                tracing::info!(node = %addr, channels = lost.len(), "sharded subscription connection closed");
                self.stale = true;
                (!lost.is_empty()).then_some(lost)
            }
            _ => None,
        }
    }

    /// Remove and return the channels for which `pred(self, channel, node)` holds.
    fn take_where(&mut self, pred: impl Fn(&Shards, &str, &Addr) -> bool) -> Vec<String> {
        let names: Vec<String> = self
            .subscribed
            .iter()
            .filter(|(c, a)| pred(self, c, a))
            .map(|(c, _)| c.clone())
            .collect();
        for c in &names {
            self.subscribed.remove(c);
        }
        names
    }

    /// The master of `channel`'s slot in the current map.
    fn owner(&self, channel: &str) -> redis::RedisResult<Addr> {
        let slot = key_slot(channel);
        match self.map.range_of(slot) {
            Some(range) => Ok(range.master.clone()),
            None => Err(io_error(format!(
                "no master serves slot {slot} (cluster down?)"
            ))),
        }
    }

    /// Send one command to `addr`, connecting first if needed.
    async fn send(&mut self, addr: &Addr, cmd: &redis::Cmd) -> redis::RedisResult<Value> {
        let conn = match self.nodes.get(addr) {
            Some(c) => c.clone(),
            None => {
                let c = self.connect(addr).await?;
                self.nodes.insert(addr.clone(), c.clone());
                c
            }
        };
        let mut conn = conn;
        match conn
            .send_packed_command(cmd)
            .await
            .and_then(Value::extract_error)
        {
            Err(e) if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() => {
                self.drop_node(addr);
                Err(e)
            }
            r => r,
        }
    }

    /// Forget a node's connection and every subscription on it (the hub subscribes them
    /// again).
    fn drop_node(&mut self, addr: &Addr) {
        self.nodes.remove(addr);
        self.subscribed.retain(|_, on| on != addr);
    }

    async fn connect(&self, addr: &Addr) -> redis::RedisResult<MultiplexedConnection> {
        let (tx, deliver) = (self.tx.clone(), self.deliver.clone());
        let tag = addr.clone();
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout))
            .set_push_sender(move |push: PushInfo| {
                if push.kind == PushKind::SMessage {
                    if let [channel, payload] = &push.data[..] {
                        if let (Some(channel), Some(payload)) = (bytes(channel), bytes(payload)) {
                            deliver(channel, payload);
                            return Ok(());
                        }
                    }
                }
                tx.send((tag.clone(), push))
            });
        let mut conn = node_client(&self.seeds, addr, redis::ProtocolVersion::RESP3)?
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        naming::set_name(&mut conn, &self.name).await;
        Ok(conn)
    }

    /// Read `CLUSTER SLOTS` from a node that answers: connected masters first, then the
    /// seeds.
    async fn refresh_map(&mut self) -> redis::RedisResult<()> {
        let known = self
            .nodes
            .iter()
            .map(|(a, c)| (a.clone(), c.clone()))
            .collect();
        self.map = fetch_slots(known, &self.seeds, self.timeout).await?;
        Ok(())
    }
}

/// A `MOVED` or `ASK` answer: the slot map is stale.
fn is_redirect(e: &redis::RedisError) -> bool {
    matches!(
        e.kind(),
        redis::ErrorKind::Server(redis::ServerErrorKind::Moved | redis::ServerErrorKind::Ask)
    )
}

fn bytes(v: &Value) -> Option<&[u8]> {
    match v {
        Value::BulkString(b) => Some(b),
        Value::SimpleString(s) => Some(s.as_bytes()),
        _ => None,
    }
}
