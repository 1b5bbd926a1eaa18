//! What the standard workloads cost on the Redis side: `INFO commandstats` of every master
//! read before and after the measured part, the scripts' calls and time between the two.
//!
//! Only scripts are counted (`EVAL`, `EVALSHA`, their `_RO` forms, `FCALL`, `FCALL_RO`):
//! every acquire attempt and every release is one script, and nothing else the bench sends
//! is one (the `contended` counter's `GET`/`SET`, these `INFO` calls), so the figure is
//! exact without telling the bench's commands from the library's. A script's `usec`
//! includes the commands it runs with `redis.call`; those are also listed under their own
//! names and are not added again. Left out: the non-script commands of the library
//! (waiters' `SUBSCRIBE`/`UNSUBSCRIBE`, health-check `PING`s).

use anyhow::{Context, Result};
use distlock::RedisConnection;
use serde_json::Value;

use super::report::num1;

/// The `commandstats` names of the script commands.
pub const SCRIPT_COMMANDS: &[&str] = &[
    "eval",
    "evalsha",
    "eval_ro",
    "evalsha_ro",
    "fcall",
    "fcall_ro",
];

/// The text of `INFO <section>` of each master, with the master's address: on a Cluster
/// redis-rs asks every master and answers a map of address → text (sorted here by host,
/// then port); otherwise one text, from the one server (the master on Sentinel), whose
/// address is left empty.
pub async fn info_by_node(
    con: &mut RedisConnection,
    section: &str,
) -> Result<Vec<(String, String)>> {
    let reply: redis::Value = redis::cmd("INFO")
        .arg(section)
        .query_async(con)
        .await
        .with_context(|| format!("INFO {section}"))?;
    let texts = match reply {
        redis::Value::Map(nodes) => nodes
            .into_iter()
            .map(|(node, text)| {
                Ok((
                    redis::from_redis_value::<String>(node)?,
                    redis::from_redis_value::<String>(text)?,
                ))
            })
            .collect::<Result<Vec<(String, String)>, redis::ParsingError>>(),
        other => redis::from_redis_value::<String>(other).map(|t| vec![(String::new(), t)]),
    };
    let mut texts = texts.with_context(|| format!("INFO {section}"))?;
    texts.sort_by_key(|(node, _)| address_order(node));
    Ok(texts)
}

/// Sort key of `host:port`: the host, then the port as a number.
fn address_order(node: &str) -> (String, u32) {
    match node.rsplit_once(':').map(|(h, p)| (h, p.parse::<u32>())) {
        Some((host, Ok(port))) => (host.to_string(), port),
        _ => (node.to_string(), 0),
    }
}

/// One `cmdstat_<name>:calls=…,usec=…,…` line of `INFO commandstats`: the calls and the time
/// spent in them (0 where a field is missing).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CommandStat {
    pub calls: u64,
    pub usec: u64,
}

/// The commands of an `INFO commandstats` text (one or several servers' texts joined), by
/// `commandstats` name (`evalsha`, `client|setname`, …), in the text's order; other lines
/// are skipped.
pub fn command_stats(text: &str) -> impl Iterator<Item = (&str, CommandStat)> {
    text.lines().filter_map(|line| {
        let (name, fields) = line
            .trim()
            .strip_prefix("cmdstat_")
            .and_then(|r| r.split_once(':'))?;
        let field = |key: &str| {
            fields
                .split(',')
                .find_map(|f| f.strip_prefix(key)?.strip_prefix('=')?.parse::<u64>().ok())
                .unwrap_or(0)
        };
        Some((
            name,
            CommandStat {
                calls: field("calls"),
                usec: field("usec"),
            },
        ))
    })
}

/// Script calls and the time spent in them on one server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Scripts {
    /// `calls` summed over [`SCRIPT_COMMANDS`].
    pub calls: u64,
    /// `usec` summed over [`SCRIPT_COMMANDS`].
    pub usec: u64,
}

impl Scripts {
    /// The script lines of an `INFO commandstats` text.
    pub fn parse(text: &str) -> Scripts {
        let mut s = Scripts::default();
        for (name, stat) in command_stats(text) {
            if SCRIPT_COMMANDS.contains(&name) {
                s.calls += stat.calls;
                s.usec += stat.usec;
            }
        }
        s
    }

    /// What was added from `before` to `self` (0 where a counter went back, e.g. after a
    /// `CONFIG RESETSTAT`).
    fn since(self, before: Scripts) -> Scripts {
        Scripts {
            calls: self.calls.saturating_sub(before.calls),
            usec: self.usec.saturating_sub(before.usec),
        }
    }
}

/// [`Scripts`] of every master at one moment, by address (in [`info_by_node`]'s order).
#[derive(Clone, Debug, Default)]
pub struct Snapshot(pub Vec<(String, Scripts)>);

/// Read [`Snapshot`] from every master.
pub async fn snapshot(con: &mut RedisConnection) -> Result<Snapshot> {
    Ok(Snapshot(
        info_by_node(con, "commandstats")
            .await?
            .into_iter()
            .map(|(node, text)| (node, Scripts::parse(&text)))
            .collect(),
    ))
}

/// The Redis-side figures of a workload (for its `extra`) from the snapshots taken before
/// and after its measured part, over its `pairs` (its `ops`):
///
/// - `server_us_per_pair`: Δ`usec` of the scripts, summed over the masters, / pairs;
/// - `server_calls_per_pair`: Δ`calls` of the scripts / pairs (3 decimals);
/// - with `per_master` (a Cluster): `server_us_per_master`, Δ`usec` on each master / pairs
///   (one entry per master that answered after the run, in `server_masters`' order), and
///   `server_masters`, their addresses.
///
/// A master absent from `before` (a failover in between) counts from 0. `null` figures
/// without pairs.
pub fn cost_extra(
    before: &Snapshot,
    after: &Snapshot,
    pairs: u64,
    per_master: bool,
) -> Vec<(&'static str, Value)> {
    let deltas: Vec<(&str, Scripts)> = after
        .0
        .iter()
        .map(|(node, now)| {
            let then = before
                .0
                .iter()
                .find(|(n, _)| n == node)
                .map(|(_, s)| *s)
                .unwrap_or_default();
            (node.as_str(), now.since(then))
        })
        .collect();
    let per = |x: u64| -> Value {
        if pairs == 0 {
            Value::Null
        } else {
            num1(x as f64 / pairs as f64)
        }
    };
    let usec: u64 = deltas.iter().map(|(_, d)| d.usec).sum();
    let calls: u64 = deltas.iter().map(|(_, d)| d.calls).sum();
    let calls_per_pair = if pairs == 0 {
        Value::Null
    } else {
        Value::from((calls as f64 / pairs as f64 * 1000.0).round() / 1000.0)
    };
    let mut extra = vec![
        ("server_us_per_pair", per(usec)),
        ("server_calls_per_pair", calls_per_pair),
    ];
    if per_master {
        extra.push((
            "server_us_per_master",
            Value::Array(deltas.iter().map(|(_, d)| per(d.usec)).collect()),
        ));
        extra.push((
            "server_masters",
            Value::Array(deltas.iter().map(|(n, _)| Value::from(*n)).collect()),
        ));
    }
    extra
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATS: &str = "# Commandstats\r\n\
        cmdstat_set:calls=100,usec=204,usec_per_call=2.04,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_info:calls=2,usec=87,usec_per_call=43.50,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_script|load:calls=58,usec=3302,usec_per_call=56.93,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_evalsha:calls=200,usec=4976,usec_per_call=24.88,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_eval:calls=1,usec=30,usec_per_call=30.00,rejected_calls=0,failed_calls=0\r\n";

    #[test]
    fn only_scripts_are_counted() {
        assert_eq!(
            Scripts::parse(STATS),
            Scripts {
                calls: 201,
                usec: 5006
            }
        );
        assert_eq!(Scripts::parse(""), Scripts::default());
    }

    #[test]
    fn cost_per_pair_and_per_master() {
        let s = |calls, usec| Scripts { calls, usec };
        let before = Snapshot(vec![
            ("127.0.0.1:7000".into(), s(10, 100)),
            ("127.0.0.1:7001".into(), s(0, 0)),
        ]);
        let after = Snapshot(vec![
            ("127.0.0.1:7000".into(), s(110, 1100)),
            ("127.0.0.1:7001".into(), s(100, 2000)),
            ("127.0.0.1:7002".into(), s(0, 0)),
        ]);
        let extra: serde_json::Map<String, Value> = cost_extra(&before, &after, 100, true)
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        assert_eq!(extra["server_us_per_pair"], 30.0);
        assert_eq!(extra["server_calls_per_pair"], 2.0);
        assert_eq!(
            extra["server_us_per_master"],
            serde_json::json!([10.0, 20.0, 0.0])
        );
        assert_eq!(extra["server_masters"][2], "127.0.0.1:7002");
        let plain = cost_extra(&before, &after, 0, false);
        assert_eq!(plain.len(), 2);
        assert!(plain.iter().all(|(_, v)| v.is_null()));
    }

    #[test]
    fn addresses_sort_by_port_number() {
        let mut v = vec!["127.0.0.1:10000", "127.0.0.1:9000", "10.0.0.1:1"];
        v.sort_by_key(|n| address_order(n));
        assert_eq!(v, ["10.0.0.1:1", "127.0.0.1:9000", "127.0.0.1:10000"]);
    }
}
