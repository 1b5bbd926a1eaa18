//! The distlock-only workloads: `watchdog` (what renewing many leases costs), `waiters`
//! (many local waiters on one lock: one subscription, one hand-off after another) and
//! `memory` (bytes and keys per held lock, keys left per idle name). Their figures are in
//! `extra`; the common fields keep the peers' meaning (`ops / seconds` = `ops_per_s`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use distlock::RedisConnection;
use distlock::{Client, LockGuard};
use serde_json::Value;

use super::report::{handoff_stats, num1, Line};
use super::{server, Bench, PREFIX};
use distlock::Lease;

/// Concurrent tasks that acquire or release the many locks of `watchdog` and `memory`.
const PARALLEL: usize = 64;

/// The text of `INFO <section>`: one per master on a Cluster, one otherwise
/// ([`server::info_by_node`] without the addresses).
async fn info_texts(con: &mut RedisConnection, section: &str) -> Result<Vec<String>> {
    Ok(server::info_by_node(con, section)
        .await?
        .into_iter()
        .map(|(_, text)| text)
        .collect())
}

/// `INFO commandstats` as command name → calls (summed over the masters of a Cluster).
async fn command_calls(con: &mut RedisConnection) -> Result<HashMap<String, u64>> {
    let text = info_texts(con, "commandstats").await?.join("\n");
    let mut calls = HashMap::new();
    for (name, stat) in server::command_stats(&text) {
        *calls.entry(name.to_string()).or_insert(0) += stat.calls;
    }
    Ok(calls)
}

/// Calls per command between two [`command_calls`] snapshots (commands with no new call
/// left out).
fn calls_delta(before: &HashMap<String, u64>, after: &HashMap<String, u64>) -> Vec<(String, u64)> {
    let mut d: Vec<(String, u64)> = after
        .iter()
        .map(|(k, v)| (k.clone(), v.saturating_sub(*before.get(k).unwrap_or(&0))))
        .filter(|(_, v)| *v > 0)
        .collect();
    d.sort();
    d
}

/// Whether a `commandstats` entry counts commands clients send (one round trip each), as
/// opposed to the data commands the scripts run inside the server (`INFO commandstats` and
/// `total_commands_processed` count those too). During the `watchdog` hold the only client
/// is the watchdog, which sends scripts only; anything else it sent would be listed here.
fn is_top_level(command: &str) -> bool {
    const TOP: &[&str] = &[
        "ping",
        "hello",
        "auth",
        "select",
        "multi",
        "exec",
        "discard",
        "watch",
        "subscribe",
        "unsubscribe",
        "psubscribe",
        "punsubscribe",
        "ssubscribe",
        "sunsubscribe",
        "readonly",
    ];
    server::SCRIPT_COMMANDS.contains(&command)
        || TOP.contains(&command)
        || ["script|", "client|", "cluster|", "function|"]
            .iter()
            .any(|p| command.starts_with(p))
}

/// One numeric field of an `INFO <section>` reply (summed over the masters of a Cluster).
async fn info_field(con: &mut RedisConnection, section: &str, field: &str) -> Result<u64> {
    let mut sum = 0;
    for text in info_texts(con, section).await? {
        sum += text
            .lines()
            .find_map(|l| {
                l.trim()
                    .strip_prefix(field)?
                    .strip_prefix(':')?
                    .parse::<u64>()
                    .ok()
            })
            .with_context(|| format!("no {field} in INFO {section}"))?;
    }
    Ok(sum)
}

/// Clients subscribed to `channel`: classic (`PUBSUB NUMSUB`) plus sharded
/// (`PUBSUB SHARDNUMSUB`, Redis 7). redis-rs asks every node of a Cluster and sums.
async fn subscribers(con: &mut RedisConnection, channel: &str) -> Result<u64> {
    let mut n = 0;
    for kind in ["NUMSUB", "SHARDNUMSUB"] {
        let reply: redis::RedisResult<(String, u64)> = redis::cmd("PUBSUB")
            .arg(kind)
            .arg(channel)
            .query_async(con)
            .await;
        match reply {
            Ok((_, count)) => n += count,
            // Servers before Redis 7 have no sharded pub/sub.
            Err(_) if kind == "SHARDNUMSUB" => {}
            Err(e) => return Err(e).with_context(|| format!("PUBSUB {kind}")),
        }
    }
    Ok(n)
}

/// CPU time (user + system) this process used so far (`getrusage(RUSAGE_SELF)`).
fn cpu_time() -> Duration {
    use nix::sys::resource::{getrusage, UsageWho};
    let Ok(usage) = getrusage(UsageWho::RUSAGE_SELF) else {
        return Duration::ZERO;
    };
    let tv = |t: nix::sys::time::TimeVal| {
        Duration::from_secs(t.tv_sec().max(0) as u64)
            + Duration::from_micros(t.tv_usec().max(0) as u64)
    };
    tv(usage.user_time()) + tv(usage.system_time())
}

/// Acquire every name (uncontended), [`PARALLEL`] at a time, and return the guards.
async fn acquire_many(
    client: &Client,
    names: &[String],
    bar: &indicatif::ProgressBar,
) -> Result<Vec<LockGuard>> {
    let names: Arc<Vec<String>> = Arc::new(names.to_vec());
    let mut tasks = Vec::new();
    for k in 0..PARALLEL.min(names.len()) {
        let (client, names, bar) = (client.clone(), names.clone(), bar.clone());
        tasks.push(tokio::spawn(async move {
            let mut guards = Vec::new();
            for name in names.iter().skip(k).step_by(PARALLEL) {
                guards.push(client.lock(name.as_str()).acquire().await?);
                bar.inc(1);
            }
            Ok::<_, distlock::Error>(guards)
        }));
    }
    let mut guards = Vec::with_capacity(names.len());
    for t in tasks {
        guards.extend(t.await.context("an acquiring task panicked")??);
    }
    Ok(guards)
}

/// Release every guard, [`PARALLEL`] at a time; returns the number of failed releases and
/// the last error.
async fn release_many(guards: Vec<LockGuard>) -> Result<(u64, String)> {
    let mut parts: Vec<Vec<LockGuard>> = (0..PARALLEL).map(|_| Vec::new()).collect();
    for (i, g) in guards.into_iter().enumerate() {
        parts[i % PARALLEL].push(g);
    }
    let mut tasks = Vec::new();
    for part in parts.into_iter().filter(|p| !p.is_empty()) {
        tasks.push(tokio::spawn(async move {
            let (mut failed, mut last) = (0u64, String::new());
            for g in part {
                if let Err(e) = g.release().await {
                    failed += 1;
                    last = e.to_string();
                }
            }
            (failed, last)
        }));
    }
    let (mut failed, mut last) = (0u64, String::new());
    for t in tasks {
        let (f, l) = t.await.context("a releasing task panicked")?;
        failed += f;
        if !l.is_empty() {
            last = l;
        }
    }
    Ok((failed, last))
}

/// How many of `keys` exist.
async fn count_existing(con: &mut RedisConnection, keys: &[String]) -> Result<u64> {
    let mut n = 0;
    for chunk in keys.chunks(1000) {
        let c: u64 = redis::cmd("EXISTS")
            .arg(chunk)
            .query_async(con)
            .await
            .context("EXISTS")?;
        n += c;
    }
    Ok(n)
}

/// Every key matching `pattern` (SCAN).
async fn scan(con: &mut RedisConnection, pattern: &str) -> Result<Vec<String>> {
    let mut cursor: u64 = 0;
    let mut out = Vec::new();
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(1000)
            .query_async(con)
            .await
            .context("SCAN")?;
        out.extend(keys);
        if next == 0 {
            return Ok(out);
        }
        cursor = next;
    }
}

/// `watchdog`: one client holds `BENCH_WATCHDOG_LOCKS` locks (no explicit lease, so the
/// watchdog renews them) for `BENCH_WATCHDOG_SECONDS`, with a watchdog lease of
/// `BENCH_WATCHDOG_LEASE_MS` so that many renewal periods pass. Reports the Redis commands
/// per renewal period (`INFO commandstats`, our own `INFO` calls left out), round trips per
/// 100 locks, and this process's CPU time during the hold as % of one core.
///
/// `ops` = locks held, `seconds` = the hold.
pub async fn watchdog(b: &Bench) -> Result<Line> {
    let s = b.settings().clone();
    let n = s.watchdog_locks;
    let lease = s.watchdog_lease;
    let period = lease / 3;
    let client = b.client_with_lease(lease).await?;
    let mut con = b.conn();
    let names: Vec<String> = (0..n).map(|i| format!("{PREFIX}wd:{i}")).collect();

    let bar = b.bar("watchdog: acquire", n);
    let t = Instant::now();
    let guards = acquire_many(&client, &names, &bar).await?;
    let acquire_s = t.elapsed().as_secs_f64();
    let registered = client.watchdog_locks();
    let keys: Vec<String> = guards.iter().map(|g| g.lock().key().to_string()).collect();

    let hold_ms = s.watchdog_hold.as_millis() as u64;
    bar.set_message("watchdog: hold (ms)");
    bar.set_position(0);
    bar.set_length(hold_ms);
    bar.reset_elapsed();
    let before = command_calls(&mut con).await?;
    let cpu0 = cpu_time();
    let t0 = Instant::now();
    let end = t0 + s.watchdog_hold;
    loop {
        let now = Instant::now();
        if now >= end {
            break;
        }
        tokio::time::sleep((end - now).min(Duration::from_millis(500))).await;
        bar.set_position((t0.elapsed().as_millis() as u64).min(hold_ms));
    }
    let cpu = cpu_time().saturating_sub(cpu0);
    let wall = t0.elapsed();
    let after = command_calls(&mut con).await?;
    bar.finish_and_clear();

    let alive = count_existing(&mut con, &keys).await?;
    let lost = guards.iter().filter(|g| g.is_lost()).count() as u64;
    let t = Instant::now();
    let (release_failures, last_err) = release_many(guards).await?;
    let release_s = t.elapsed().as_secs_f64();

    let delta: Vec<(String, u64)> = calls_delta(&before, &after)
        .into_iter()
        .filter(|(k, _)| k != "info")
        .collect();
    let sum = |f: &dyn Fn(&str) -> bool| -> u64 {
        delta.iter().filter(|(k, _)| f(k)).map(|(_, v)| v).sum()
    };
    let server_commands = sum(&|_| true);
    let commands = sum(&|k| is_top_level(k));
    let renewal_calls = sum(&|k| k.starts_with("eval") || k == "fcall");
    let periods = wall.as_secs_f64() / period.as_secs_f64().max(1e-9);
    let per_period = |x: u64| {
        if periods > 0.0 {
            x as f64 / periods
        } else {
            0.0
        }
    };
    let commands_per_period = per_period(commands);
    let breakdown: serde_json::Map<String, Value> = delta
        .into_iter()
        .map(|(k, v)| (k, Value::from(v)))
        .collect();
    let cpu_pct = 100.0 * cpu.as_secs_f64() / wall.as_secs_f64().max(1e-9);
    Ok(Line::new(
        "watchdog",
        1,
        n,
        wall.as_secs_f64(),
        &[],
        None,
        b.notes(&format!(
            "{n} locks held by one client with watchdog lease {lease:?} (renewal every \
             {period:?}); commands counted with INFO commandstats, CPU with getrusage"
        )),
        vec![
            ("locks", Value::from(n)),
            ("hold_s", num1(wall.as_secs_f64())),
            ("lease_ms", Value::from(lease.as_millis() as u64)),
            ("period_ms", Value::from(period.as_millis() as u64)),
            ("renewal_periods", num1(periods)),
            ("renewal_calls", Value::from(renewal_calls)),
            ("renewal_calls_per_period", num1(per_period(renewal_calls))),
            ("commands", Value::from(commands)),
            ("commands_per_period", num1(commands_per_period)),
            ("server_commands", Value::from(server_commands)),
            (
                "server_commands_per_period",
                num1(per_period(server_commands)),
            ),
            (
                "round_trips_per_100_locks",
                Value::from((commands_per_period * 100.0 / n as f64 * 1000.0).round() / 1000.0),
            ),
            ("cpu_ms", num1(cpu.as_secs_f64() * 1000.0)),
            (
                "cpu_pct_of_core",
                Value::from((cpu_pct * 100.0).round() / 100.0),
            ),
            ("watchdog_locks", Value::from(registered as u64)),
            ("alive_after", Value::from(alive)),
            ("lost_leases", Value::from(lost)),
            (
                "acquire_s",
                Value::from((acquire_s * 1000.0).round() / 1000.0),
            ),
            (
                "release_s",
                Value::from((release_s * 1000.0).round() / 1000.0),
            ),
            ("failed_acquires", Value::from(0)),
            ("failed_releases", Value::from(release_failures)),
            ("command_breakdown", Value::Object(breakdown)),
            ("last_error", Value::from(last_err)),
        ],
    ))
}

/// `waiters`: `BENCH_WAITERS` tasks of one client wait on one held lock
/// (`bench:w:lock`). While they wait, `PUBSUB NUMSUB` of its wake channel must be 1 (one
/// subscription for all). Then the holder releases and every waiter takes the lock in
/// turn (acquire, release at once). p50/p99 = hand-off latency between consecutive
/// holders (next acquire returned − previous release returned).
///
/// `ops` = waiters served, `seconds` = first release → last waiter's release.
pub async fn waiters(b: &Bench) -> Result<Line> {
    let s = b.settings().clone();
    let w = s.waiters;
    // Waiters are served one after another; give the queue time to drain even when slow.
    let wait = s.wait.max(Duration::from_secs(120));
    let client = b.client().await?;
    let mut con = b.conn();
    let lock = client.lock(format!("{PREFIX}w:lock"));
    let channel = lock.channel().to_string();
    let holder = lock.acquire().await.context("the holder's acquire")?;
    let holder_acquired = Instant::now();

    let bar = b.bar("waiters: subscribe", w);
    let before = command_calls(&mut con).await?;
    // Script calls: FCALLs where the client runs Redis Functions, EVALSHAs otherwise.
    let scripts = |calls: &std::collections::HashMap<String, u64>| {
        ["evalsha", "fcall"]
            .iter()
            .map(|c| calls.get(*c).copied().unwrap_or(0))
            .sum::<u64>()
    };
    let attempts_before = scripts(&before);
    let setup = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..w as usize {
        let (lock, bar) = (client.lock(lock.name()), bar.clone());
        tasks.push(tokio::spawn(async move {
            let r = match lock.try_acquire_for(wait).await {
                Ok(Some(g)) => {
                    let acquired = Instant::now();
                    let r = g.release().await;
                    let released = Instant::now();
                    r.map(|()| (acquired, released, i))
                        .map_err(|e| e.to_string())
                }
                Ok(None) => Err(format!("not acquired within {wait:?}")),
                Err(e) => Err(e.to_string()),
            };
            bar.inc(1);
            r
        }));
    }
    // Every waiter makes two attempts (before and after subscribing) and then sleeps until
    // woken: wait for 2·W attempts on the server, so that all of them are really waiting.
    let all_waiting_limit = Duration::from_secs(30).max(s.wait);
    let (all_waiting, attempts) = loop {
        let now = command_calls(&mut con).await?;
        let attempts = scripts(&now).saturating_sub(attempts_before);
        bar.set_position(attempts / 2);
        if attempts >= 2 * w {
            break (true, attempts);
        }
        if setup.elapsed() > all_waiting_limit {
            break (false, attempts);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let setup_ms = setup.elapsed().as_secs_f64() * 1000.0;
    let numsub = subscribers(&mut con, &channel).await?;
    let status = lock.status().await.context("Lock::status")?;

    bar.set_message("waiters: hand-offs");
    bar.set_position(0);
    bar.reset_elapsed();
    holder.release().await.context("the holder's release")?;
    let t0 = Instant::now();
    let mut events = vec![(holder_acquired, t0, usize::MAX)];
    let (mut fails, mut last_err) = (0u64, String::new());
    let mut last_release = t0;
    for t in tasks {
        match t.await.context("a waiter panicked")? {
            Ok(e) => {
                last_release = last_release.max(e.1);
                events.push(e);
            }
            Err(e) => {
                fails += 1;
                last_err = e;
            }
        }
    }
    bar.finish_and_clear();
    let secs = (last_release - t0).as_secs_f64();
    let served = events.len() as u64 - 1;
    let h = handoff_stats(events);
    Ok(Line::new(
        "waiters",
        w,
        served,
        secs,
        &h.handoffs_ns,
        None,
        b.notes(&format!(
            "{w} tasks of one client wait on one lock (try_acquire_for {wait:?}); each \
             acquires and releases at once when its turn comes"
        )),
        vec![
            ("waiters", Value::from(w)),
            ("numsub", Value::from(numsub)),
            ("status_subscribers", Value::from(status.subscribers)),
            ("all_waiting", Value::from(all_waiting)),
            ("attempts_before_release", Value::from(attempts)),
            ("setup_ms", num1(setup_ms)),
            ("served", Value::from(served)),
            ("failed_acquires", Value::from(fails)),
            ("release_races", Value::from(h.release_races)),
            ("last_error", Value::from(last_err)),
        ],
    ))
}

/// `lost`: `BENCH_LOST_REPS` times, one client holds a lock (`bench:lost:<i>`, watchdog
/// lease) and a second client force-unlocks it. p50/p99 = from the force unlock's call to
/// the holder's `lost()` firing (the holder learns from the notice the force unlock
/// publishes, not at its next renewal a third of the lease later). A lost signal that does
/// not fire within the wait (`BENCH_WAIT_SECONDS`) is counted in `not_fired` and left out.
///
/// `ops` = force unlocks, `seconds` = the whole run.
pub async fn lost(b: &Bench) -> Result<Line> {
    let s = b.settings().clone();
    let holder = b.client().await?;
    let operator = b.client().await?;
    let bar = b.bar("lost", s.lost_reps);
    let (mut samples, mut not_fired) = (Vec::new(), 0u64);
    let t0 = Instant::now();
    for i in 0..s.lost_reps {
        let name = format!("{PREFIX}lost:{i}");
        let guard = holder
            .lock(name.as_str())
            .acquire()
            .await
            .context("the holder's acquire")?;
        let called = Instant::now();
        let was = operator
            .lock(name.as_str())
            .force_unlock()
            .await
            .context("the force unlock")?;
        anyhow::ensure!(was, "{name}: the force unlock found no lock");
        match tokio::time::timeout(s.wait, guard.lost()).await {
            Ok(()) => samples.push(called.elapsed().as_nanos() as u64),
            Err(_) => not_fired += 1,
        }
        // Answered "not held" (the lock is gone): ends the guard here rather than in a
        // background release at its drop.
        let _ = guard.release().await;
        bar.inc(1);
    }
    bar.finish_and_clear();
    let secs = t0.elapsed().as_secs_f64();
    Ok(Line::new(
        "lost",
        2,
        s.lost_reps,
        secs,
        &samples,
        None,
        b.notes(&format!(
            "one client holds, another force-unlocks; watchdog lease {:?}",
            b.watchdog_lease
        )),
        vec![
            ("fired", Value::from(samples.len() as u64)),
            ("not_fired", Value::from(not_fired)),
            ("failed_acquires", Value::from(0u64)),
            (
                "last_error",
                Value::from(if not_fired == 0 {
                    String::new()
                } else {
                    format!("{not_fired} lost signals did not fire within {:?}", s.wait)
                }),
            ),
        ],
    ))
}

/// What `SCAN` finds for the lock names of `memory`.
#[derive(Debug, Default)]
struct Census {
    /// The lock hashes themselves.
    lock_keys: u64,
    /// `redisson_unlock_latch:{name}:<request>` keys (short-lived).
    unlock_latches: u64,
    /// `distlock_acquire_latch:{name}:<request>` keys (short-lived).
    acquire_latches: u64,
    /// Anything else whose name contains a lock name.
    other: u64,
    /// One unlock latch, to read its TTL.
    sample_latch: Option<String>,
}

async fn census(con: &mut RedisConnection, locks: &HashSet<String>) -> Result<Census> {
    let mut c = Census::default();
    for key in scan(con, &format!("*{PREFIX}m:*")).await? {
        if key.starts_with("redisson_unlock_latch:") {
            c.unlock_latches += 1;
            c.sample_latch.get_or_insert(key);
        } else if key.starts_with("distlock_acquire_latch:") {
            c.acquire_latches += 1;
        } else if locks.contains(&key) {
            c.lock_keys += 1;
        } else {
            c.other += 1;
        }
    }
    Ok(c)
}

/// `memory`: hold `BENCH_MEMORY_LOCKS` locks (`bench:m:<i>`), measure `MEMORY USAGE` of
/// their keys, `used_memory` per lock and the keys that exist per held lock; release them
/// and count what is left per idle name: lock keys and anything else (should be 0), the
/// short-lived unlock latches (one per release that leaves holds, TTL = the command timeout) until they
/// expire, and the fencing counter keys: one per cluster hash slot the names fall in.
///
/// `ops` = locks, `seconds` = the whole workload (including waiting for the latches).
pub async fn memory(b: &Bench) -> Result<Line> {
    let s = b.settings().clone();
    let n = s.memory_locks;
    let client = b.client().await?;
    let mut con = b.conn();
    let names: Vec<String> = (0..n).map(|i| format!("{PREFIX}m:{i}")).collect();
    let locks: HashSet<String> = names
        .iter()
        .map(|n| client.lock(n.as_str()).key().to_string())
        .collect();

    let t0 = Instant::now();
    let bar = b.bar("memory: acquire", n);
    let used_before = info_field(&mut con, "memory", "used_memory").await?;
    let guards = acquire_many(&client, &names, &bar).await?;
    let used_after = info_field(&mut con, "memory", "used_memory").await?;
    bar.finish_and_clear();

    let keys: Vec<String> = guards.iter().map(|g| g.lock().key().to_string()).collect();
    let mut usage: Vec<u64> = Vec::with_capacity(keys.len());
    for chunk in keys.chunks(1000) {
        let mut pipe = redis::pipe();
        for k in chunk {
            pipe.cmd("MEMORY").arg("USAGE").arg(k).arg("SAMPLES").arg(0);
        }
        let r: Vec<Option<u64>> = pipe.query_async(&mut con).await.context("MEMORY USAGE")?;
        usage.extend(r.into_iter().flatten());
    }
    if usage.len() as u64 != n {
        bail!("MEMORY USAGE found {} of {n} held lock keys", usage.len());
    }
    let hash_fields: u64 = redis::cmd("HLEN")
        .arg(&keys[0])
        .query_async(&mut con)
        .await
        .context("HLEN")?;
    let status = guards[0].lock().status().await.context("Lock::status")?;
    let held = census(&mut con, &locks).await?;

    let (release_failures, last_err) = release_many(guards).await?;
    let released = Instant::now();
    let idle = census(&mut con, &locks).await?;
    let latch_ttl_ms: Option<i64> = match &idle.sample_latch {
        Some(k) => Some(
            redis::cmd("PTTL")
                .arg(k)
                .query_async(&mut con)
                .await
                .context("PTTL")?,
        ),
        None => None,
    };
    // One fencing counter per cluster hash slot the names fall in.
    let counter_slots: Vec<String> = names
        .iter()
        .map(|n| client.lock(n.as_str()).fencing_counter_key())
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    let counter_keys = count_existing(&mut con, &counter_slots).await?;

    // The latches expire after the command timeout; wait for them (a little longer).
    let limit = b.command_timeout() + Duration::from_secs(2);
    let mut latches_gone_ms = None;
    let mut later = Census::default();
    while released.elapsed() <= limit {
        later = census(&mut con, &locks).await?;
        if later.unlock_latches + later.acquire_latches == 0 {
            latches_gone_ms = Some(released.elapsed().as_secs_f64() * 1000.0);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let secs = t0.elapsed().as_secs_f64();

    let avg = usage.iter().sum::<u64>() as f64 / n as f64;
    let per = |x: u64| (x as f64 / n as f64 * 1000.0).round() / 1000.0;
    let held_keys = held.lock_keys + held.unlock_latches + held.acquire_latches + held.other;
    Ok(Line::new(
        "memory",
        1,
        n,
        secs,
        &[],
        None,
        b.notes(&format!(
            "{n} locks held at once; MEMORY USAGE SAMPLES 0; keys found with SCAN"
        )),
        vec![
            ("locks", Value::from(n)),
            ("memory_usage_bytes", num1(avg)),
            (
                "memory_usage_min_bytes",
                Value::from(usage.iter().min().copied().unwrap_or(0)),
            ),
            (
                "memory_usage_max_bytes",
                Value::from(usage.iter().max().copied().unwrap_or(0)),
            ),
            (
                "used_memory_per_lock_bytes",
                num1((used_after as f64 - used_before as f64) / n as f64),
            ),
            ("hash_fields", Value::from(hash_fields)),
            (
                "fencing_token_in_hash",
                Value::from(status.fencing_token.is_some()),
            ),
            ("keys_per_held_lock", Value::from(per(held_keys))),
            ("lock_keys_held", Value::from(held.lock_keys)),
            (
                "keys_left_per_idle_name",
                Value::from(per(idle.lock_keys + idle.other)),
            ),
            ("lock_keys_left", Value::from(idle.lock_keys)),
            ("other_keys_left", Value::from(idle.other)),
            (
                "unlock_latches_after_release",
                Value::from(idle.unlock_latches),
            ),
            (
                "acquire_latches_after_release",
                Value::from(idle.acquire_latches),
            ),
            (
                "latch_ttl_ms",
                latch_ttl_ms.map(Value::from).unwrap_or(Value::Null),
            ),
            (
                "latches_gone_after_ms",
                latches_gone_ms.map(num1).unwrap_or(Value::Null),
            ),
            (
                "latches_left_at_end",
                Value::from(later.unlock_latches + later.acquire_latches),
            ),
            ("fencing_counter_keys", Value::from(counter_keys)),
            ("fencing_counter_slots", Value::from(counter_slots.len())),
            ("failed_acquires", Value::from(0)),
            ("failed_releases", Value::from(release_failures)),
            ("last_error", Value::from(last_err)),
        ],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delta_of_command_stats() {
        let before: HashMap<String, u64> =
            [("evalsha".to_string(), 5), ("info".to_string(), 1)].into();
        let after: HashMap<String, u64> = [
            ("evalsha".to_string(), 25),
            ("info".to_string(), 2),
            ("ping".to_string(), 1),
        ]
        .into();
        assert_eq!(
            calls_delta(&before, &after),
            vec![
                ("evalsha".to_string(), 20),
                ("info".to_string(), 1),
                ("ping".to_string(), 1)
            ]
        );
    }

    #[test]
    fn cpu_time_advances() {
        let t0 = cpu_time();
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_add(i * i);
        }
        std::hint::black_box(x);
        assert!(cpu_time() > t0);
    }
}
