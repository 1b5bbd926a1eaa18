//! Redis Cluster's slot map (`CLUSTER SLOTS` with `CLUSTER NODES`), and clients for its nodes.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use redis::{ConnectionAddr, ConnectionInfo, Value};

/// How often a slot map is read again without any other reason (grants and sharded
/// subscriptions each keep one).
pub(crate) const REFRESH_EVERY: Duration = Duration::from_secs(5);

/// A node's address as `CLUSTER SLOTS` names it: `host:port`.
pub(crate) type Addr = Arc<str>;

/// One range of slots: its master and how many healthy replicas it has (replicas of that
/// master that `CLUSTER NODES` does not flag `fail` or `fail?`).
#[derive(Debug, Clone)]
pub(crate) struct Range {
    first: u16,
    last: u16,
    pub(crate) master: Addr,
    pub(crate) replicas: u32,
}

/// Which master serves each slot, from `CLUSTER SLOTS` and `CLUSTER NODES`.
#[derive(Debug, Clone, Default)]
pub(crate) struct SlotMap {
    /// Sorted by first slot.
    ranges: Vec<Range>,
}

/// What `CLUSTER NODES` (`<id> <ip:port@bus[,hostname]> <flags> <master id> …` per line)
/// says: each node's `ip:port`, and each master's healthy replicas, by node id.
#[derive(Default)]
struct NodeTable {
    addr_of: HashMap<String, Addr>,
    healthy: HashMap<String, u32>,
}

impl NodeTable {
    fn parse(nodes: &str) -> NodeTable {
        let mut table = NodeTable::default();
        for line in nodes.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [id, addr, flags, master, ..] = fields[..] else {
                continue;
            };
            let addr = addr.split('@').next().unwrap_or(addr);
            if !addr.starts_with(':') {
                table.addr_of.insert(id.to_string(), Addr::from(addr));
            }
            let down = flags
                .split(',')
                .any(|f| f == "fail" || f == "fail?" || f == "handshake" || f == "noaddr");
            if master != "-" && !down {
                *table.healthy.entry(master.to_string()).or_default() += 1;
            }
        }
        table
    }
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

impl SlotMap {
    /// Parse a `CLUSTER SLOTS` reply (`[[first, last, [host, port, id, …], replica…], …]`)
    /// with the `CLUSTER NODES` text of the same node. A master is found by its node id:
    /// its address is the reply's host and port, or — when the host is empty, `?` or null
    /// (`cluster-preferred-endpoint-type` hostname or unknown-endpoint) — the `ip:port` of
    /// `CLUSTER NODES`, or the node that answered (`asked`); its healthy replicas are counted
    /// by id, so a hostname in one reply and an address in the other still match.
    pub(crate) fn parse(
        slots: Value,
        nodes: &str,
        asked: Option<&Addr>,
    ) -> redis::RedisResult<SlotMap> {
        let Value::Array(ranges) = slots else {
            return Err(io_error("CLUSTER SLOTS: not an array".into()));
        };
        let table = NodeTable::parse(nodes);
        let mut map = Vec::with_capacity(ranges.len());
        for range in &ranges {
            let Value::Array(fields) = range else {
                continue;
            };
            let (Some(Value::Int(first)), Some(Value::Int(last)), Some(Value::Array(master))) =
                (fields.first(), fields.get(1), fields.get(2))
            else {
                continue;
            };
            let host = master.first().and_then(text);
            let port = match master.get(1) {
                Some(Value::Int(p)) => Some(*p),
                _ => None,
            };
            let id = master.get(2).and_then(text);
            let addr = match (host.as_deref(), port) {
                (Some(h), Some(p)) if !h.is_empty() && h != "?" => {
                    Some(Addr::from(format!("{h}:{p}")))
                }
                _ => id
                    .as_ref()
                    .and_then(|id| table.addr_of.get(id).cloned())
                    .or_else(|| asked.cloned()),
            };
            let Some(master) = addr else { continue };
            map.push(Range {
                first: *first as u16,
                last: *last as u16,
                master,
                replicas: id
                    .and_then(|id| table.healthy.get(&id).copied())
                    .unwrap_or(0),
            });
        }
        map.sort_by_key(|r| r.first);
        Ok(SlotMap { ranges: map })
    }

    /// The range serving `slot`.
    pub(crate) fn range_of(&self, slot: u16) -> Option<&Range> {
        let i = self.ranges.partition_point(|r| r.first <= slot);
        i.checked_sub(1)
            .map(|i| &self.ranges[i])
            .filter(|r| slot <= r.last)
    }

    /// The masters, each once.
    pub(crate) fn masters(&self) -> Vec<Addr> {
        let mut m: Vec<Addr> = self.ranges.iter().map(|r| r.master.clone()).collect();
        m.sort();
        m.dedup();
        m
    }
}

/// Read the slot map (`CLUSTER SLOTS`, with healthy replicas counted from `CLUSTER NODES`)
/// from the first of `known` (connections to nodes) or `seeds` that answers within `timeout`
/// each.
pub(crate) async fn fetch_slots(
    known: Vec<(Addr, redis::aio::MultiplexedConnection)>,
    seeds: &[redis::Client],
    timeout: Duration,
) -> redis::RedisResult<SlotMap> {
    let mut last = None;
    let mut both = redis::pipe();
    both.cmd("CLUSTER").arg("SLOTS").cmd("CLUSTER").arg("NODES");
    let both = &both;
    let parse = |(slots, nodes): (Value, String), asked: Option<&Addr>| {
        SlotMap::parse(slots, &nodes, asked)
    };
    for (addr, mut conn) in known {
        match tokio::time::timeout(timeout, both.query_async::<(Value, String)>(&mut conn)).await {
            Ok(Ok(v)) => return parse(v, Some(&addr)),
            Ok(Err(e)) => last = Some(e),
            Err(_) => last = Some(io_error(format!("{addr}: no answer to CLUSTER SLOTS"))),
        }
    }
    for seed in seeds {
        let attempt = async {
            let mut conn = seed.get_multiplexed_async_connection().await?;
            both.query_async::<(Value, String)>(&mut conn).await
        };
        match tokio::time::timeout(timeout, attempt).await {
            Ok(Ok(v)) => {
                let asked = match seed.get_connection_info().addr() {
                    ConnectionAddr::Tcp(h, p)
                    | ConnectionAddr::TcpTls {
                        host: h, port: p, ..
                    } => Some(Addr::from(format!("{h}:{p}"))),
                    _ => None,
                };
                return parse(v, asked.as_ref());
            }
            Ok(Err(e)) => last = Some(e),
            Err(_) => last = Some(io_error("a seed node: no answer to CLUSTER SLOTS".into())),
        }
    }
    Err(last.unwrap_or_else(|| io_error("no cluster node answered".into())))
}

/// A client for the node `addr` (`host:port`) with the first seed's connection settings
/// (auth, TLS) and `protocol`.
pub(crate) fn node_client(
    seeds: &[redis::Client],
    addr: &str,
    protocol: redis::ProtocolVersion,
) -> redis::RedisResult<redis::Client> {
    let seed = seeds
        .first()
        .ok_or_else(|| io_error("no seed node".into()))?;
    crate::conn::naming::client(node_info(seed.get_connection_info(), addr, protocol)?)
}

/// `seed`'s connection settings (auth, TLS) with the address `addr` (`host:port`) and
/// `protocol`.
fn node_info(
    seed: &ConnectionInfo,
    addr: &str,
    protocol: redis::ProtocolVersion,
) -> redis::RedisResult<ConnectionInfo> {
    let (host, port) = addr
        .rsplit_once(':')
        .and_then(|(h, p)| Some((h.to_string(), p.parse::<u16>().ok()?)))
        .ok_or_else(|| io_error(format!("bad node address {addr:?}")))?;
    let addr = match seed.addr() {
        ConnectionAddr::TcpTls {
            insecure,
            tls_params,
            ..
        } => ConnectionAddr::TcpTls {
            host,
            port,
            insecure: *insecure,
            tls_params: tls_params.clone(),
        },
        _ => ConnectionAddr::Tcp(host, port),
    };
    let redis = seed.redis_settings().clone().set_protocol(protocol);
    Ok(seed.clone().set_addr(addr).set_redis_settings(redis))
}

/// An I/O error saying `msg` (a node that does not answer, or answers nonsense).
pub(crate) fn io_error(msg: String) -> redis::RedisError {
    redis::RedisError::from(std::io::Error::other(msg))
}

#[cfg(test)]
mod tests {
    use super::SlotMap;
    use redis::Value;

    fn node(host: Option<&str>, port: i64, id: &str) -> Value {
        Value::Array(vec![
            host.map_or(Value::Nil, |h| Value::BulkString(h.into())),
            Value::Int(port),
            Value::BulkString(id.into()),
        ])
    }

    #[test]
    fn slot_maps_find_masters_by_id_and_count_healthy_replicas() {
        let slots = Value::Array(vec![
            Value::Array(vec![
                Value::Int(0),
                Value::Int(5460),
                node(Some("m1.example"), 7000, "id1"),
                node(Some("r1.example"), 7003, "id4"),
            ]),
            Value::Array(vec![
                Value::Int(5461),
                Value::Int(10922),
                node(Some("?"), 7001, "id2"),
            ]),
            Value::Array(vec![
                Value::Int(10923),
                Value::Int(16383),
                node(None, 7002, "id3"),
            ]),
        ]);
        let nodes = "id1 10.0.0.1:7000@17000,m1.example myself,master - 0 0 1 connected 0-5460\n\
                     id2 10.0.0.2:7001@17001 master - 0 0 2 connected 5461-10922\n\
                     id3 10.0.0.3:7002@17002 master - 0 0 3 connected 10923-16383\n\
                     id4 10.0.0.4:7003@17003,r1.example slave id1 0 0 1 connected\n\
                     id5 10.0.0.5:7004@17004 slave id2 0 0 2 connected\n\
                     id6 10.0.0.6:7005@17005 slave,fail id3 0 0 3 disconnected\n";
        let map = SlotMap::parse(slots, nodes, None).unwrap();
        let at = |slot| {
            let r = map.range_of(slot).unwrap();
            (r.master.to_string(), r.replicas)
        };
        // A hostname in CLUSTER SLOTS, an address in CLUSTER NODES: matched by id.
        assert_eq!(at(0), ("m1.example:7000".into(), 1));
        // `?` and a null host: the address from CLUSTER NODES.
        assert_eq!(at(6000), ("10.0.0.2:7001".into(), 1));
        // A failed replica does not count.
        assert_eq!(at(16383), ("10.0.0.3:7002".into(), 0));
        assert!(map.range_of(16384).is_none());
    }
}
