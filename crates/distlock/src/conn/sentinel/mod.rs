//! Redis Sentinel (`redis-sentinel://`, `rediss-sentinel://`): the master is resolved by
//! distlock itself and followed across failovers.
//!
//! redis-rs's Sentinel client resolves the master once and never follows a failover
//! (redis-rs issue #1438), so this module does the resolution: ask every sentinel in parallel
//! (`SENTINEL MASTER <name>`), keep the answers whose flags say the master is not down, take
//! the one with the highest config epoch, and check with `ROLE` that the server is a master.
//! A monitor task follows failovers: it listens for `+switch-master` on every sentinel and
//! asks again every second. On a switch the command connection is replaced at once (requests
//! after the switch go to the new master; the old master's connection closes when its last
//! in-flight request ends), and the subscription hub reconnects to the new master and wakes
//! every local waiter, so none waits for a message published to nobody.

use std::sync::{Arc, RwLock, Weak};
use std::time::Duration;

use futures_util::StreamExt;
use redis::aio::ConnectionManager;
use tokio::sync::watch;

use super::grant_slots::{grant_slots, open_grant_slot, GrantSlot, SetAside};
use super::naming;
use super::standalone::Server;
use super::ConnectSettings;
use resolve::{classify, resolve, SentinelConns};

pub(crate) use resolve::Failure;
pub(crate) use url::{is_sentinel_url, SentinelUrl};

mod resolve;
mod url;

/// How often the monitor asks the sentinels, besides listening for `+switch-master`.
const POLL_INTERVAL: Duration = Duration::from_secs(1);
/// How long connecting waits between tries while the sentinels name no live master (a
/// failover under way).
const CONNECT_RETRY: Duration = Duration::from_millis(200);

/// The master in use now.
struct Current {
    addr: String,
    /// The config epoch the sentinels gave with it (the fencing tokens' generation).
    epoch: u64,
    /// The master's command connection and client.
    server: Server,
    /// Healthy replicas of this master in the sentinels' view (not the master's own count:
    /// an isolated old master reports none and would grant unconfirmed).
    replicas: u32,
    grant_slots: Vec<GrantSlot>,
}

/// A resolved and followed Sentinel master: what the command connection, the subscription
/// hub and the blocking fallback read.
pub(crate) struct Master {
    config: SentinelUrl,
    settings: ConnectSettings,
    current: RwLock<Current>,
    /// Bumped on every switch; the hub reconnects when it changes.
    switches: watch::Sender<u64>,
    /// Wakes the monitor at once (e.g. after a READONLY reply).
    nudge: tokio::sync::Notify,
    /// Round robin over the grant connections.
    next_slot: std::sync::atomic::AtomicUsize,
    /// One connection per sentinel, kept between polls.
    sentinels: SentinelConns,
}

impl Master {
    /// Resolve the master, connect to it, and start following failovers (the monitor task
    /// ends when the last handle is dropped).
    ///
    /// A deployment in the middle of a failover (the master down or refusing connections,
    /// the sentinels not yet agreed on its successor) is tried again every 200 ms until the
    /// connect timeout has passed since the call, so a process started while the sentinels
    /// promote a replica connects to it. Refused credentials and a master name no sentinel
    /// knows fail at once.
    pub(crate) async fn connect(
        config: SentinelUrl,
        settings: &ConnectSettings,
    ) -> Result<Arc<Master>, (Failure, String)> {
        let sentinels: SentinelConns = config
            .url
            .hosts
            .iter()
            .map(|_| std::sync::Mutex::new(None))
            .collect();
        let started = tokio::time::Instant::now();
        let deadline = started + settings.connect_timeout;
        let mut tries = 0u32;
        let (answer, server) = loop {
            tries += 1;
            let attempt = async {
                let answer = resolve(&config, settings, &sentinels).await?;
                let server = open_master(&config, settings, &answer.addr)
                    .await
                    .map_err(|e| (classify(&e), e))?;
                Ok::<_, (Failure, String)>((answer, server))
            };
            let failed = match tokio::time::timeout_at(deadline, attempt).await {
                Ok(Ok(connected)) => break connected,
                Ok(Err(failed)) => failed,
                Err(_) => (
                    Failure::Unavailable,
                    "no answer within the connect timeout".to_string(),
                ),
            };
            let now = tokio::time::Instant::now();
            if failed.0 != Failure::Unavailable || now + CONNECT_RETRY >= deadline {
                let (kind, message) = failed;
                if tries == 1 {
                    return Err((kind, message));
                }
                return Err((
                    kind,
                    format!(
                        "{message} (tried {tries} times over {:.1} s, waiting for the \
                         sentinels to name a live master)",
                        (now - started).as_secs_f64()
                    ),
                ));
            }
            tokio::time::sleep(CONNECT_RETRY).await;
        };
        let master = Arc::new(Master {
            config,
            settings: settings.clone(),
            current: RwLock::new(Current {
                addr: answer.addr,
                epoch: answer.epoch,
                server,
                replicas: answer.replicas,
                grant_slots: grant_slots(),
            }),
            switches: watch::channel(0).0,
            nudge: tokio::sync::Notify::new(),
            next_slot: Default::default(),
            sentinels,
        });
        tokio::spawn(monitor(Arc::downgrade(&master)));
        Ok(master)
    }

    /// The command connection to the current master (cheap: a shared handle).
    pub(crate) fn manager(&self) -> ConnectionManager {
        self.current.read().unwrap().server.manager.clone()
    }

    /// A client for the current master (pub/sub connections, the blocking fallback).
    pub(crate) fn client(&self) -> redis::Client {
        (*self.current.read().unwrap().server.client).clone()
    }

    /// Replicas a grant waits for (`WAIT`), as configured.
    pub(crate) fn replica_acks(&self) -> u32 {
        self.settings.replica_acks
    }

    /// The config epoch of the current master (the generation of the fencing tokens it
    /// issues, which rises with every failover).
    pub(crate) fn epoch(&self) -> u64 {
        self.current.read().unwrap().epoch
    }

    /// Changes on every switch of master.
    pub(crate) fn switches(&self) -> watch::Receiver<u64> {
        self.switches.subscribe()
    }

    /// Where a grant goes now: the current master, fixed for the grant (after a switch it
    /// fails, and is built again), with its config epoch, read together; and — when grants
    /// are confirmed — a connection to it set aside for the grant, with the replicas to wait
    /// for (the number asked for, at most the healthy replicas the sentinels see). No
    /// set-aside connection when grants need no confirmation (asked for none, or no healthy
    /// replica to ask).
    pub(crate) async fn grant_connection(&self) -> Result<(Server, u64, Option<SetAside>), String> {
        let (server, epoch, wanted, slot) = {
            let current = self.current.read().unwrap();
            let wanted = self.settings.replica_acks.min(current.replicas);
            if wanted == 0 {
                return Ok((current.server.clone(), current.epoch, None));
            }
            let n = self
                .next_slot
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            (
                current.server.clone(),
                current.epoch,
                wanted,
                current.grant_slots[n % current.grant_slots.len()].clone(),
            )
        };
        let client = (*server.client).clone();
        let (conn, guard) = open_grant_slot(slot, || Ok(client), &self.settings).await?;
        let set_aside = SetAside {
            conn,
            wanted,
            timeout: self.settings.replica_ack_timeout,
            guard,
        };
        Ok((server, epoch, Some(set_aside)))
    }

    /// Ask the sentinels now rather than at the next poll (the master refused a write, or
    /// cannot be reached).
    pub(crate) fn nudge(&self) {
        self.nudge.notify_one();
    }

    /// Ask the sentinels; switch to the master they name if it is another one.
    async fn refresh(&self) -> Result<(), String> {
        let answer = resolve(&self.config, &self.settings, &self.sentinels)
            .await
            .map_err(|(_, e)| e)?;
        {
            let mut current = self.current.write().unwrap();
            if answer.epoch < current.epoch {
                // A sentinel with an older view (e.g. cut off from the others): keep ours.
                return Ok(());
            }
            if answer.addr == current.addr {
                current.replicas = answer.replicas;
                current.epoch = current.epoch.max(answer.epoch);
                return Ok(());
            }
        }
        let server = open_master(&self.config, &self.settings, &answer.addr).await?;
        let old = {
            let mut current = self.current.write().unwrap();
            let old = std::mem::replace(
                &mut *current,
                Current {
                    addr: answer.addr.clone(),
                    epoch: answer.epoch,
                    server,
                    replicas: answer.replicas,
                    grant_slots: grant_slots(),
                },
            );
            old.addr
        };
        tracing::warn!(
            master = %self.config.master_name,
            from = %old,
            to = %answer.addr,
            config_epoch = answer.epoch,
            "Sentinel master switched; commands and subscriptions move to the new master"
        );
        self.switches.send_modify(|n| *n += 1);
        Ok(())
    }
}

/// Connect to `addr` and check that it is a master (`ROLE`).
async fn open_master(
    config: &SentinelUrl,
    settings: &ConnectSettings,
    addr: &str,
) -> Result<Server, String> {
    let client =
        naming::client_with_ca(config.master_url(addr).as_str(), settings.tls_ca.as_deref())
            .map_err(|e| format!("master {addr}: {}", e.category()))?;
    let server = tokio::time::timeout(settings.connect_timeout, Server::connect(client, settings))
        .await
        .map_err(|_| format!("master {addr}: no answer within the connect timeout"))?
        .map_err(|e| format!("master {addr}: {e}"))?;
    let mut con = server.manager.clone();
    let role: redis::Value = tokio::time::timeout(
        settings.command_timeout,
        redis::cmd("ROLE").query_async(&mut con),
    )
    .await
    .map_err(|_| format!("master {addr}: ROLE timed out"))?
    .map_err(|e| format!("master {addr}: ROLE: {e}"))?;
    let role = match &role {
        redis::Value::Array(items) => items.first().and_then(|v| match v {
            redis::Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
            redis::Value::SimpleString(s) => Some(s.clone()),
            _ => None,
        }),
        _ => None,
    };
    if role.as_deref() != Some("master") {
        return Err(format!(
            "{addr}, named master by the sentinels, says it is a {}",
            role.as_deref().unwrap_or("server of unknown role")
        ));
    }
    Ok(server)
}

/// Follow failovers while `master` lives: ask the sentinels every second, and at once when
/// a listener hears `+switch-master` or a request meets a demoted or unreachable master.
async fn monitor(master: Weak<Master>) {
    // One listener per sentinel: the first that hears the switch wakes the monitor (the
    // elected leader announces it at once, the others only after their next hello).
    if let Some(m) = master.upgrade() {
        for sentinel in m.config.url.hosts.clone() {
            tokio::spawn(listen(master.clone(), sentinel));
        }
    }
    loop {
        let Some(m) = master.upgrade() else { return };
        tokio::select! {
            () = tokio::time::sleep(POLL_INTERVAL) => {}
            () = m.nudge.notified() => {}
        }
        if let Err(e) = m.refresh().await {
            tracing::debug!(error = %e, "Sentinel: could not resolve the master; asking again");
        }
        drop(m);
    }
}

/// Listen for `+switch-master` of our master on `sentinel` and nudge the monitor; reconnect
/// after a second when the connection fails; end with the master.
async fn listen(master: Weak<Master>, sentinel: String) {
    let Some(m) = master.upgrade() else { return };
    let (config, settings) = (m.config.clone(), m.settings.clone());
    // Closes when the master (its sender) is dropped: then this task ends at once.
    let mut gone = m.switches();
    drop(m);
    let ended = async { while gone.changed().await.is_ok() {} };
    tokio::pin!(ended);
    loop {
        let heard = async {
            if let Some(mut pubsub) = open_listener(&config, &settings, &sentinel).await {
                let mut stream = pubsub.on_message();
                while let Some(msg) = stream.next().await {
                    let payload: String = msg.get_payload().unwrap_or_default();
                    if payload.split(' ').next() == Some(config.master_name.as_str()) {
                        match master.upgrade() {
                            Some(m) => m.nudge(),
                            None => return,
                        }
                    }
                }
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        };
        tokio::select! {
            () = &mut ended => return,
            () = heard => {}
        }
        if master.strong_count() == 0 {
            return;
        }
    }
}

async fn open_listener(
    config: &SentinelUrl,
    settings: &ConnectSettings,
    sentinel: &str,
) -> Option<redis::aio::PubSub> {
    let client = naming::client_with_ca(
        config.sentinel_url(sentinel).as_str(),
        settings.tls_ca.as_deref(),
    )
    .ok()?;
    let mut pubsub = tokio::time::timeout(settings.connect_timeout, client.get_async_pubsub())
        .await
        .ok()?
        .ok()?;
    pubsub.subscribe("+switch-master").await.ok()?;
    Some(pubsub)
}
