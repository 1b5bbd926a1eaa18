//! Asking the sentinels which server is the master, and why that failed.

use super::url::SentinelUrl;
use crate::conn::naming;
use crate::conn::ConnectSettings;

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
pub(super) fn classify(message: &str) -> Failure {
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

/// What a sentinel says about the master.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Answer {
    pub(super) addr: String,
    pub(super) epoch: u64,
    /// Replicas the sentinel sees healthy (`SENTINEL REPLICAS`: not down, link up).
    pub(super) replicas: u32,
}

/// One connection per sentinel (by its place in the URL), opened on first use and dropped
/// when a query on it fails: the poll every second reuses them instead of connecting anew.
pub(super) type SentinelConns = Vec<std::sync::Mutex<Option<redis::aio::MultiplexedConnection>>>;

/// Ask every sentinel in parallel; the answer with the highest config epoch among those that
/// do not flag the master down.
pub(super) async fn resolve(
    config: &SentinelUrl,
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
    config: &SentinelUrl,
    settings: &ConnectSettings,
    sentinel: &str,
    cached: &std::sync::Mutex<Option<redis::aio::MultiplexedConnection>>,
) -> Result<Option<Answer>, String> {
    let ask = async {
        let kept = cached.lock().unwrap().clone();
        let mut con = match kept {
            Some(con) => con,
            None => {
                let client = naming::client_with_ca(
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
