//! The hub's connections: the classic link, a Cluster's sharded links, both as the hub drives them.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::mpsc;

use super::shards::Shards;
use super::Deliver;
use crate::conn::naming;
use crate::scripts::Publish;

/// The subscription connection(s) of the hub as opened: classic, sharded, or both.
pub(crate) struct Links {
    pub(crate) classic: Option<ClassicLink>,
    pub(crate) sharded: Option<Shards>,
}

impl Links {
    /// A classic link alone (a standalone server, a Sentinel master).
    pub(crate) fn classic(link: ClassicLink) -> Links {
        Links {
            classic: Some(link),
            sharded: None,
        }
    }

    /// The links of a Cluster, as `publish` says: sharded pub/sub on each channel's master,
    /// classic pub/sub on any node (the cluster forwards every `PUBLISH` to all nodes: the
    /// seed nodes are tried in turn), or both. Each connection is named `name`.
    pub(crate) async fn cluster(
        seeds: &Arc<Vec<redis::Client>>,
        publish: Publish,
        name: &Arc<str>,
        timeout: Duration,
        deliver: &Deliver,
    ) -> redis::RedisResult<Links> {
        let sharded = match publish {
            Publish::Classic => None,
            Publish::Sharded | Publish::Both => {
                Some(Shards::open(seeds.clone(), timeout, name.clone(), deliver.clone()).await?)
            }
        };
        let classic = match publish {
            Publish::Sharded => None,
            Publish::Classic | Publish::Both => {
                Some(ClassicLink::open_any(seeds, timeout, name, deliver).await?)
            }
        };
        Ok(Links { classic, sharded })
    }
}

/// The hub's live subscription connections.
pub(super) struct Conn {
    /// Classic pub/sub (`SUBSCRIBE`), split so that messages are read while commands go out.
    classic: Option<Classic>,
    /// Sharded pub/sub (`SSUBSCRIBE`, Cluster): one connection per master.
    sharded: Option<Shards>,
}

/// The classic link, and what the server has subscribed on it.
struct Classic {
    link: ClassicLink,
    /// Channels the server has us subscribed to.
    server: HashSet<String>,
}

/// The classic (`SUBSCRIBE`) subscription connection of the hub.
///
/// Over RESP3 where the server speaks it (Redis 6 and later): a multiplexed connection whose
/// push messages carry the publications, and which can send `CLIENT SETNAME` like any other.
/// redis-rs's RESP2 pub/sub connection sends nothing but (un)subscriptions and `PING`, so it
/// cannot be named: it is only the fallback for a server (or proxy) that refuses `HELLO 3`.
pub(crate) enum ClassicLink {
    /// A named RESP3 connection and the pushes it receives.
    Resp3 {
        conn: redis::aio::MultiplexedConnection,
        pushes: mpsc::UnboundedReceiver<redis::PushInfo>,
    },
    /// redis-rs's RESP2 pub/sub connection, split so that messages are read while
    /// commands go out. Unnamed.
    Resp2 {
        sink: redis::aio::PubSubSink,
        stream: redis::aio::PubSubStream,
    },
}

impl ClassicLink {
    /// Open a subscription connection to the server of `client` and name it `name`
    /// (`CLIENT SETNAME`; failures are logged and ignored): over RESP3, or over RESP2 when
    /// the server refuses RESP3 (then unnamed). `timeout` bounds the connect. Over RESP3
    /// each message goes to `deliver` as the connection reads it; everything else (and every
    /// message over RESP2) comes out of [`ClassicLink::next`].
    pub(crate) async fn open(
        client: &redis::Client,
        name: &str,
        timeout: Duration,
        deliver: &Deliver,
    ) -> redis::RedisResult<ClassicLink> {
        let info = client.get_connection_info().clone();
        let resp3 = info
            .redis_settings()
            .clone()
            .set_protocol(redis::ProtocolVersion::RESP3);
        let resp3_client = redis::Client::open(info.set_redis_settings(resp3))?;
        let (tx, pushes) = mpsc::unbounded_channel();
        let deliver = deliver.clone();
        let tx = move |push: redis::PushInfo| {
            if push.kind == redis::PushKind::Message {
                if let [channel, payload] = &push.data[..] {
                    if let (Some(channel), Some(payload)) = (bytes(channel), bytes(payload)) {
                        deliver(channel, payload);
                        return Ok(());
                    }
                }
            }
            tx.send(push)
        };
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(timeout))
            // A subscription waits for its confirmation as long as the connection lives, as
            // over RESP2 (the hub reconnects when the connection closes).
            .set_response_timeout(None)
            .set_push_sender(tx);
        match resp3_client
            .get_multiplexed_async_connection_with_config(&config)
            .await
        {
            Ok(mut conn) => {
                naming::set_name(&mut conn, name).await;
                Ok(ClassicLink::Resp3 { conn, pushes })
            }
            // The server answered, but not to HELLO 3: an older server or a proxy.
            Err(e) if e.kind() == redis::ErrorKind::RESP3NotSupported || e.code().is_some() => {
                tracing::debug!(
                    error = format_args!("{e:#}"),
                    "RESP3 refused: subscribing over RESP2 (the connection cannot be named)"
                );
                let (sink, stream) = client.get_async_pubsub().await?.split();
                Ok(ClassicLink::Resp2 { sink, stream })
            }
            Err(e) => Err(e),
        }
    }

    /// Open a subscription connection named `name` to the first of the `seeds` (Cluster
    /// nodes) that answers within `timeout` each.
    async fn open_any(
        seeds: &[redis::Client],
        timeout: Duration,
        name: &str,
        deliver: &Deliver,
    ) -> redis::RedisResult<ClassicLink> {
        let mut last = None;
        for client in seeds {
            match tokio::time::timeout(timeout, ClassicLink::open(client, name, timeout, deliver))
                .await
            {
                Ok(Ok(link)) => return Ok(link),
                Ok(Err(e)) => last = Some(e),
                Err(_) => {}
            }
        }
        Err(last.unwrap_or_else(|| {
            redis::RedisError::from(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "no cluster node answered",
            ))
        }))
    }

    async fn subscribe(&mut self, name: &str) -> redis::RedisResult<()> {
        match self {
            ClassicLink::Resp3 { conn, .. } => conn.subscribe(name).await,
            ClassicLink::Resp2 { sink, .. } => sink.subscribe(name).await,
        }
    }

    async fn unsubscribe(&mut self, name: &str) -> redis::RedisResult<()> {
        match self {
            ClassicLink::Resp3 { conn, .. } => conn.unsubscribe(name).await,
            ClassicLink::Resp2 { sink, .. } => sink.unsubscribe(name).await,
        }
    }

    /// The next message as (channel, payload), over RESP2 only (over RESP3 the connection's
    /// reader delivers them, see `open`); `None` once the connection closed. Cancel safe.
    async fn next(&mut self) -> Option<(String, Vec<u8>)> {
        match self {
            // Left here: subscription confirmations (answered to the requests as well), and
            // the disconnection.
            ClassicLink::Resp3 { pushes, .. } => loop {
                if pushes.recv().await?.kind == redis::PushKind::Disconnection {
                    return None;
                }
            },
            ClassicLink::Resp2 { stream, .. } => stream.next().await.map(|msg| {
                (
                    msg.get_channel_name().to_string(),
                    msg.get_payload_bytes().to_vec(),
                )
            }),
        }
    }
}

fn bytes(v: &redis::Value) -> Option<&[u8]> {
    match v {
        redis::Value::BulkString(b) => Some(b),
        redis::Value::SimpleString(s) => Some(s.as_bytes()),
        _ => None,
    }
}

/// What the connections delivered.
pub(super) enum Event {
    Message(String, Vec<u8>),
    /// Channels whose subscription was lost (or moved): subscribe again, wake their waiters.
    Resync(Vec<String>),
    /// The classic connection closed.
    Closed,
}

impl Conn {
    /// The hub's connections over freshly opened `links` (nothing subscribed yet).
    pub(super) fn new(links: Links) -> Conn {
        Conn {
            classic: links.classic.map(|link| Classic {
                link,
                server: HashSet::new(),
            }),
            sharded: links.sharded,
        }
    }

    /// Whether the server has `name` subscribed on every kind of connection in use.
    pub(super) fn has(&self, name: &str) -> bool {
        self.classic
            .as_ref()
            .is_none_or(|c| c.server.contains(name))
            && self.sharded.as_ref().is_none_or(|s| s.has(name))
    }

    /// Whether the server has `name` subscribed on any connection.
    pub(super) fn has_any(&self, name: &str) -> bool {
        self.classic
            .as_ref()
            .is_some_and(|c| c.server.contains(name))
            || self.sharded.as_ref().is_some_and(|s| s.has(name))
    }

    pub(super) async fn subscribe(&mut self, name: &str) -> redis::RedisResult<()> {
        if let Some(c) = self.classic.as_mut() {
            if !c.server.contains(name) {
                c.link.subscribe(name).await?;
                c.server.insert(name.to_string());
            }
        }
        if let Some(s) = self.sharded.as_mut() {
            if !s.has(name) {
                s.subscribe(name).await?;
            }
        }
        Ok(())
    }

    pub(super) async fn unsubscribe(&mut self, name: &str) -> redis::RedisResult<()> {
        if let Some(c) = self.classic.as_mut() {
            if c.server.remove(name) {
                c.link.unsubscribe(name).await?;
            }
        }
        if let Some(s) = self.sharded.as_mut() {
            s.unsubscribe(name).await?;
        }
        Ok(())
    }

    pub(super) async fn next(&mut self) -> Event {
        let classic = async {
            match self.classic.as_mut() {
                Some(c) => match c.link.next().await {
                    Some((channel, payload)) => Event::Message(channel, payload),
                    None => Event::Closed,
                },
                None => std::future::pending().await,
            }
        };
        let sharded = async {
            match self.sharded.as_mut() {
                Some(s) => Event::Resync(s.next().await),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            e = classic => e,
            e = sharded => e,
        }
    }
}
