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
//!
//! `INFO stats` of the same masters gives the socket reads the server processed
//! (`total_reads_processed`, Redis 6.0+): fewer reads than script calls means requests
//! arrived pipelined, several in one read — what one client's multiplexed connection does
//! with the concurrent requests of its tasks.

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

/// Script calls and the time spent in them on one server, and the socket reads it
/// processed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Scripts {
    /// `calls` summed over [`SCRIPT_COMMANDS`].
    pub calls: u64,
    /// `usec` summed over [`SCRIPT_COMMANDS`].
    pub usec: u64,
    /// `total_reads_processed` of `INFO stats` (every client's reads; 0 where the server
    /// does not report it).
    pub reads: u64,
}

impl Scripts {
    /// The script lines of an `INFO commandstats` text, and `total_reads_processed` when
    /// the text also has the `stats` section.
    pub fn parse(text: &str) -> Scripts {
        let mut s = Scripts {
            reads: text
                .lines()
                .find_map(|l| {
                    l.trim()
                        .strip_prefix("total_reads_processed:")?
                        .parse()
                        .ok()
                })
                .unwrap_or(0),
            ..Scripts::default()
        };
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
            reads: self.reads.saturating_sub(before.reads),
        }
    }
}

/// [`Scripts`] of every master at one moment, by address (in [`info_by_node`]'s order).
#[derive(Clone, Debug, Default)]
pub struct Snapshot(pub Vec<(String, Scripts)>);

/// Read [`Snapshot`] from every master: `INFO commandstats`, then `INFO stats` (two calls:
/// Redis before 7.0 takes one section per `INFO`).
pub async fn snapshot(con: &mut RedisConnection) -> Result<Snapshot> {
    let stats = info_by_node(con, "stats").await?;
    Ok(Snapshot(
        info_by_node(con, "commandstats")
            .await?
            .into_iter()
            .map(|(node, text)| {
                let mut s = Scripts::parse(&text);
                s.reads = stats
                    .iter()
                    .find(|(n, _)| *n == node)
                    .map_or(0, |(_, t)| Scripts::parse(t).reads);
                (node, s)
            })
            .collect(),
    ))
}

/// The Redis-side figures of a workload (for its `extra`) from the snapshots taken before
/// and after its measured part, over its `pairs` (its `ops`):
///
/// - `server_us_per_pair`: Δ`usec` of the scripts, summed over the masters, / pairs;
/// - `server_calls_per_pair`: Δ`calls` of the scripts / pairs (3 decimals);
/// - `server_reads_per_pair`: Δ`total_reads_processed`, summed over the masters, / pairs
///   (3 decimals): below `server_calls_per_pair` when requests arrive pipelined; `null`
///   where the server reports no reads;
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
    let reads: u64 = deltas.iter().map(|(_, d)| d.reads).sum();
    let per3 = |x: u64| -> Value {
        if pairs == 0 {
            Value::Null
        } else {
            Value::from((x as f64 / pairs as f64 * 1000.0).round() / 1000.0)
        }
    };
    let mut extra = vec![
        ("server_us_per_pair", per(usec)),
        ("server_calls_per_pair", per3(calls)),
        // No reads at all: a server that does not report them (before Redis 6.0).
        (
            "server_reads_per_pair",
            if reads == 0 { Value::Null } else { per3(reads) },
        ),
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
                usec: 5006,
                reads: 0
            }
        );
        assert_eq!(Scripts::parse(""), Scripts::default());
        let stats = "# Stats\r\ntotal_commands_processed:242379\r\ntotal_reads_processed:6567\r\n";
        assert_eq!(Scripts::parse(stats).reads, 6567);
    }

    #[test]
    fn cost_per_pair_and_per_master() {
        let s = |calls, usec, reads| Scripts { calls, usec, reads };
        let before = Snapshot(vec![
            ("127.0.0.1:7000".into(), s(10, 100, 5)),
            ("127.0.0.1:7001".into(), s(0, 0, 0)),
        ]);
        let after = Snapshot(vec![
            ("127.0.0.1:7000".into(), s(110, 1100, 30)),
            ("127.0.0.1:7001".into(), s(100, 2000, 25)),
            ("127.0.0.1:7002".into(), s(0, 0, 0)),
        ]);
        let extra: serde_json::Map<String, Value> = cost_extra(&before, &after, 100, true)
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        assert_eq!(extra["server_us_per_pair"], 30.0);
        assert_eq!(extra["server_calls_per_pair"], 2.0);
        assert_eq!(extra["server_reads_per_pair"], 0.5);
        assert_eq!(
            extra["server_us_per_master"],
            serde_json::json!([10.0, 20.0, 0.0])
        );
        assert_eq!(extra["server_masters"][2], "127.0.0.1:7002");
        let plain = cost_extra(&before, &after, 0, false);
        assert_eq!(plain.len(), 3);
        assert!(plain.iter().all(|(_, v)| v.is_null()));
    }

    #[test]
    fn addresses_sort_by_port_number() {
        let mut v = vec!["127.0.0.1:10000", "127.0.0.1:9000", "10.0.0.1:1"];
        v.sort_by_key(|n| address_order(n));
        assert_eq!(v, ["10.0.0.1:1", "127.0.0.1:9000", "127.0.0.1:10000"]);
    }
}
