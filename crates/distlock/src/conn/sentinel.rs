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

use super::url::MultiHost;
use super::ConnectSettings;

/// Port of a sentinel given without one.
const DEFAULT_SENTINEL_PORT: u16 = 26379;
/// How often the monitor asks the sentinels, besides listening for `+switch-master`.
const POLL_INTERVAL: Duration = Duration::from_secs(1);
/// How long connecting waits between tries while the sentinels name no live master (a
/// failover under way).
const CONNECT_RETRY: Duration = Duration::from_millis(200);

/// Why connecting through the sentinels failed, for the error kind: only a deployment in
/// the middle of a failover is worth trying again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failure {
    /// No live master yet (down, refusing connections, a replica not yet promoted), or no
    /// sentinel answered: tried again until the connect timeout.
    Unavailable,
    /// A server refused the credentials (`NOAUTH`, `WRONGPASS`): final.
    Auth,
    /// Every sentinel that answered knows no master of that name: final.
    UnknownMaster,
}

/// What a refusal's text says: auth and unknown-name refusals are final.
fn classify(message: &str) -> Failure {
    if message.contains("NOAUTH")
        || message.contains("WRONGPASS")
        || message.contains("invalid password")
        || message.contains("invalid username-password")
    {
        Failure::Auth
    } else {
        Failure::Unavailable
    }
}

/// Where a Sentinel deployment is: parsed from a `redis-sentinel://` URL.
#[derive(Clone)]
pub(crate) struct Config {
    url: MultiHost,
    /// The master's name in the sentinels' configuration.
    master_name: String,
    /// `user:password@` for the sentinels, when they require auth.
    sentinel_userinfo: String,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("sentinels", &self.url.hosts)
            .field("master_name", &self.master_name)
            .finish()
    }
}

/// Whether `url` names a Sentinel deployment (lettuce's URL form).
pub(crate) fn is_sentinel_url(url: &str) -> bool {
    url.starts_with("redis-sentinel://") || url.starts_with("rediss-sentinel://")
}

impl Config {
    /// Parse lettuce's form `redis-sentinel://[user:password@]host1[:port1][,host2[:port2]…][/db][?query]#master-name`
    /// (`rediss-sentinel://` for TLS). Sentinels without a port listen on 26379.
    /// `sentinel_auth` is `user:password` (or `:password`) for the sentinels, if they need it.
    ///
    /// Errors are messages without the password.
    pub(crate) fn parse(url: &str, sentinel_auth: Option<&str>) -> Result<Config, String> {
        let mut url = MultiHost::parse(
            url,
            "redis-sentinel",
            "rediss-sentinel",
            DEFAULT_SENTINEL_PORT,
            "sentinel",
        )?;
        let master_name = url
            .fragment
            .take()
            .ok_or("no master name: end the URL with #<master-name>")?;
        if master_name.is_empty() {
            return Err("empty master name after #".into());
        }
        Ok(Config {
            url,
            master_name,
            sentinel_userinfo: sentinel_auth.map(|a| format!("{a}@")).unwrap_or_default(),
        })
    }

    fn master_url(&self, addr: &str) -> String {
        self.url.node_url(&self.url.userinfo, addr)
    }

    fn sentinel_url(&self, addr: &str) -> String {
        // A sentinel has no databases: always 0; TLS settings apply to it too.
        let mut url = self.url.clone();
        url.db_path = "/".into();
        url.node_url(&self.sentinel_userinfo, addr)
    }
}

/// What a sentinel says about the master.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Answer {
    addr: String,
    epoch: u64,
    /// Replicas the sentinel sees healthy (`SENTINEL REPLICAS`: not down, link up).
    replicas: u32,
}

/// The master in use now.
struct Current {
    addr: String,
    /// The config epoch the sentinels gave with it (the fencing tokens' generation).
    epoch: u64,
    client: redis::Client,
    manager: ConnectionManager,
    /// Healthy replicas of this master in the sentinels' view (not the master's own count:
    /// an isolated old master reports none and would grant unconfirmed).
    replicas: u32,
    grant_slots: Vec<super::GrantSlot>,
}

/// A resolved and followed Sentinel master: what the command connection, the subscription
/// hub and the blocking fallback read.
pub(crate) struct Master {
    config: Config,
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

/// One connection per sentinel (by its place in the URL), opened on first use and dropped
/// when a query on it fails: the poll every second reuses them instead of connecting anew.
type SentinelConns = Vec<std::sync::Mutex<Option<redis::aio::MultiplexedConnection>>>;

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
        config: Config,
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
        let (answer, client, manager) = loop {
            tries += 1;
            let attempt = async {
                let answer = resolve(&config, settings, &sentinels).await?;
                let (client, manager) = open_master(&config, settings, &answer.addr)
                    .await
                    .map_err(|e| (classify(&e), e))?;
                Ok::<_, (Failure, String)>((answer, client, manager))
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
                client,
                manager,
                replicas: answer.replicas,
                grant_slots: super::grant_slots(),
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
        self.current.read().unwrap().manager.clone()
    }

    /// A client for the current master (pub/sub connections, the blocking fallback).
    pub(crate) fn client(&self) -> redis::Client {
        self.current.read().unwrap().client.clone()
    }

    /// The command connection to the current master and its config epoch (the generation
    /// of the fencing tokens it issues, which rises with every failover), read together.
    /// Replicas a grant waits for (`WAIT`), as configured.
    pub(crate) fn replica_acks(&self) -> u32 {
        self.settings.replica_acks
    }

    pub(crate) fn snapshot(&self) -> (ConnectionManager, u64) {
        let current = self.current.read().unwrap();
        (current.manager.clone(), current.epoch)
    }

    /// Changes on every switch of master.
    pub(crate) fn switches(&self) -> watch::Receiver<u64> {
        self.switches.subscribe()
    }

    /// A connection set aside for one grant to be confirmed by `WAIT`, held exclusively
    /// until the guard drops, with the replicas to wait for (the number asked for, at most
    /// the healthy replicas the sentinels see) and the timeout; `None` when grants need no
    /// confirmation (asked for none, or no healthy replica to ask).
    pub(crate) async fn grant_connection(
        &self,
    ) -> Result<
        Option<(
            redis::aio::MultiplexedConnection,
            u64,
            u32,
            Duration,
            super::GrantSlotGuard,
        )>,
        String,
    > {
        let (wanted, slot, client, epoch) = {
            let current = self.current.read().unwrap();
            let wanted = self.settings.replica_acks.min(current.replicas);
            if wanted == 0 {
                return Ok(None);
            }
            let n = self
                .next_slot
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            (
                wanted,
                current.grant_slots[n % current.grant_slots.len()].clone(),
                current.client.clone(),
                current.epoch,
            )
        };
        let (c, conn) = super::open_grant_slot(slot, || Ok(client), &self.settings).await?;
        Ok(Some((
            c,
            epoch,
            wanted,
            self.settings.replica_ack_timeout,
            conn,
        )))
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
        let (client, manager) = open_master(&self.config, &self.settings, &answer.addr).await?;
        let old = {
            let mut current = self.current.write().unwrap();
            let old = std::mem::replace(
                &mut *current,
                Current {
                    addr: answer.addr.clone(),
                    epoch: answer.epoch,
                    client,
                    manager,
                    replicas: answer.replicas,
                    grant_slots: super::grant_slots(),
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
    config: &Config,
    settings: &ConnectSettings,
    addr: &str,
) -> Result<(redis::Client, ConnectionManager), String> {
    let client =
        super::naming::client_with_ca(config.master_url(addr).as_str(), settings.tls_ca.as_deref())
            .map_err(|e| format!("master {addr}: {}", e.category()))?;
    let manager = tokio::time::timeout(
        settings.connect_timeout,
        super::standalone::connect(&client, settings),
    )
    .await
    .map_err(|_| format!("master {addr}: no answer within the connect timeout"))?
    .map_err(|e| format!("master {addr}: {e}"))?;
    let mut con = manager.clone();
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
    Ok((client, manager))
}

/// Ask every sentinel in parallel; the answer with the highest config epoch among those that
/// do not flag the master down.
async fn resolve(
    config: &Config,
    settings: &ConnectSettings,
    conns: &SentinelConns,
) -> Result<Answer, (Failure, String)> {
    let asks = config
        .url
        .hosts
        .iter()
        .zip(conns)
        .map(|(s, conn)| ask_sentinel(config, settings, s, conn));
    let answers = futures_util::future::join_all(asks).await;
    let mut best: Option<Answer> = None;
    let mut errors = Vec::new();
    // Every sentinel that answered refused the name, or the credentials: nothing to wait for.
    let (mut unknown, mut auth, mut answered) = (0, 0, 0);
    for (sentinel, answer) in config.url.hosts.iter().zip(answers) {
        match answer {
            Ok(Some(a)) => {
                answered += 1;
                if best.as_ref().is_none_or(|b| a.epoch > b.epoch) {
                    best = Some(a);
                }
            }
            Ok(None) => {
                answered += 1;
                errors.push(format!("{sentinel}: master down"));
            }
            Err(e) => {
                if e.contains("No such master") {
                    unknown += 1;
                    answered += 1;
                } else if classify(&e) == Failure::Auth {
                    auth += 1;
                    answered += 1;
                }
                errors.push(format!("{sentinel}: {e}"));
            }
        }
    }
    best.ok_or_else(|| {
        let failure = if answered > 0 && unknown == answered {
            Failure::UnknownMaster
        } else if answered > 0 && auth == answered {
            Failure::Auth
        } else {
            Failure::Unavailable
        };
        let message = format!(
            "no sentinel names a live master {:?} ({})",
            config.master_name,
            errors.join("; ")
        );
        (failure, message)
    })
}

/// One sentinel's view of the master: `None` when it flags the master down.
async fn ask_sentinel(
    config: &Config,
    settings: &ConnectSettings,
    sentinel: &str,
    cached: &std::sync::Mutex<Option<redis::aio::MultiplexedConnection>>,
) -> Result<Option<Answer>, String> {
    let ask = async {
        let kept = cached.lock().unwrap().clone();
        let mut con = match kept {
            Some(con) => con,
            None => {
                let client = super::naming::client_with_ca(
                    config.sentinel_url(sentinel).as_str(),
                    settings.tls_ca.as_deref(),
                )
                .map_err(|e| e.category().to_string())?;
                let con = client
                    .get_multiplexed_async_connection()
                    .await
                    .map_err(|e| e.to_string())?;
                *cached.lock().unwrap() = Some(con.clone());
                con
            }
        };
        let fields: Vec<String> = redis::cmd("SENTINEL")
            .arg("MASTER")
            .arg(&config.master_name)
            .query_async(&mut con)
            .await
            .map_err(|e| e.to_string())?;
        let replicas: Vec<Vec<String>> = redis::cmd("SENTINEL")
            .arg("REPLICAS")
            .arg(&config.master_name)
            .query_async(&mut con)
            .await
            .map_err(|e| e.to_string())?;
        Ok::<_, String>((fields, replicas))
    };
    let answered = tokio::time::timeout(settings.connect_timeout, ask)
        .await
        .map_err(|_| "no answer within the connect timeout".to_string())
        .and_then(|r| r);
    let (fields, replicas) = match answered {
        Ok(v) => v,
        Err(e) => {
            // Connect again at the next poll.
            *cached.lock().unwrap() = None;
            return Err(e);
        }
    };
    // Down means s_down or o_down; a sentinel that has just switched reports the new master
    // as `disconnected` until its own link to it is up, which is no reason to wait.
    if flagged(&fields, &["s_down", "o_down"]) {
        return Ok(None);
    }
    let (Some(ip), Some(port)) = (reply_field(&fields, "ip"), reply_field(&fields, "port")) else {
        return Err("SENTINEL MASTER reply without ip and port".into());
    };
    let host = if ip.contains(':') {
        format!("[{ip}]")
    } else {
        ip.to_string()
    };
    Ok(Some(Answer {
        addr: format!("{host}:{port}"),
        epoch: reply_field(&fields, "config-epoch")
            .and_then(|e| e.parse().ok())
            .unwrap_or(0),
        replicas: replicas.iter().filter(|r| healthy_replica(r)).count() as u32,
    }))
}

/// The value of `name` in a sentinel's flat `name, value, …` reply.
fn reply_field<'a>(fields: &'a [String], name: &str) -> Option<&'a str> {
    fields
        .chunks(2)
        .find(|kv| kv[0] == name)
        .and_then(|kv| kv.get(1).map(String::as_str))
}

/// Whether the reply's `flags` carry any of `any`.
fn flagged(fields: &[String], any: &[&str]) -> bool {
    reply_field(fields, "flags")
        .unwrap_or("")
        .split(',')
        .any(|f| any.contains(&f))
}

/// Whether a `SENTINEL REPLICAS` entry is a replica that can confirm writes: not flagged
/// down or disconnected, and its link to the master up.
fn healthy_replica(fields: &[String]) -> bool {
    !flagged(fields, &["s_down", "o_down", "disconnected"])
        && reply_field(fields, "master-link-status") == Some("ok")
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
    config: &Config,
    settings: &ConnectSettings,
    sentinel: &str,
) -> Option<redis::aio::PubSub> {
    let client = super::naming::client_with_ca(
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

#[cfg(test)]
mod tests {
    use super::Config;

    #[test]
    fn parses_lettuce_sentinel_urls() {
        let c = Config::parse(
            "redis-sentinel://app:s3cret@h1:26379,h2,h3:26380/2#mymaster",
            None,
        )
        .unwrap();
        assert_eq!(c.url.hosts, ["h1:26379", "h2:26379", "h3:26380"]);
        assert_eq!(c.master_name, "mymaster");
        assert_eq!(
            c.master_url("10.0.0.5:6379"),
            "redis://app:s3cret@10.0.0.5:6379/2"
        );
        assert_eq!(c.sentinel_url("h1:26379"), "redis://h1:26379/");
        let c = Config::parse("rediss-sentinel://h1#m", Some(":pw")).unwrap();
        assert_eq!(c.master_url("h:1"), "rediss://h:1");
        assert_eq!(c.sentinel_url("h1:26379"), "rediss://:pw@h1:26379/");
        let c = Config::parse("rediss-sentinel://h1/1?insecure#m", None).unwrap();
        assert_eq!(c.master_url("h:1"), "rediss://h:1/1#insecure");
        // A password with `/` (not percent-encoded) stays whole, and out of the hosts.
        let c = Config::parse("redis-sentinel://u:se/cret@h1#m", None).unwrap();
        assert_eq!(c.url.hosts, ["h1:26379"]);
        let c = Config::parse("redis-sentinel://[::1]:26379,[::1]#m", None).unwrap();
        assert_eq!(c.url.hosts, ["[::1]:26379", "[::1]:26379"]);
        for bad in [
            "redis-sentinel://h1:26379",
            "redis-sentinel://h1#",
            "redis-sentinel://h1:x#m",
            "redis-sentinel://h1,,h2#m",
            "redis-sentinel://h1/x#m",
            "redis://h1#m",
            "redis-sentinel://u:s3cret@h1:x#m",
            "redis-sentinel://u:s3/cret@h1/x#m",
        ] {
            let e = Config::parse(bad, None).unwrap_err();
            assert!(!e.contains("s3cret") && !e.contains("cret"), "{e}");
        }
    }
}
