//! `distlock status NAME… [--json] [--env ENV]`: holders with hold counts, TTL, fencing
//! token, waiting clients, and for a plain or fair lock held by a distlock client who holds
//! it (application, host, process id, for how long); for job locks (`--env`, or a name
//! `job-lock:<env>:<job>`) the holder's host and the time it took the lock.

use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;

use crate::connect::Options;

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// Lock names.
    #[arg(required = true)]
    pub names: Vec<String>,
    /// Print one JSON array instead of text.
    #[arg(long)]
    pub json: bool,
    /// The names are job locks (`distlock run --at-most`) in this environment.
    #[arg(long)]
    pub env: Option<String>,
    /// The names are RedLocks over these independent masters (comma-separated URLs): show
    /// each node's view.
    #[arg(long, value_delimiter = ',', conflicts_with = "env")]
    pub redlock: Vec<String>,
}

#[derive(Serialize)]
struct NodeView {
    node: String,
    #[serde(flatten)]
    view: Option<Row>,
    error: Option<String>,
}

/// One line of output, in the order the names were given.
#[derive(Serialize)]
#[serde(untagged)]
enum Item {
    Lock(Row),
    Job(JobRow),
    Semaphore(SemaphoreRow),
    RedLock {
        kind: &'static str,
        name: String,
        nodes: Vec<NodeView>,
    },
}

fn row(s: distlock::LockStatus) -> Row {
    Row {
        kind: "lock",
        held: !s.holders.is_empty(),
        holder: s
            .holder
            .map(|h| holder_info(h, std::time::SystemTime::now())),
        holders: s
            .holders
            .into_iter()
            .map(|(owner, hold_count)| Holder { owner, hold_count })
            .collect(),
        ttl_ms: s.ttl.map(|t| t.as_millis() as u64),
        fencing_token: s.fencing_token.map(|t| t.get()),
        fencing_counter: s.fencing_counter,
        waiting_clients: s.subscribers,
        mode: s.mode,
        queue: s.queue,
        waiting_writers: None,
        name: s.name,
        key: s.key,
    }
}

/// Status of any lock-family name: a plain, fair or read-write lock (hash), or a semaphore
/// (string of permits).
async fn lock_item(client: &distlock::Client, name: &str) -> Result<Item> {
    match client.lock(name).status().await {
        Ok(s) if s.mode.is_some() => {
            let rw = client.rw_lock(name).status().await?;
            let waiting = rw.waiting_writers;
            let mut r = row(rw);
            r.kind = "rwlock";
            r.waiting_writers = Some(waiting);
            Ok(Item::Lock(r))
        }
        Ok(s) => {
            let fair = client.fair_lock(name).status().await?;
            if fair.queue.is_empty() {
                return Ok(Item::Lock(row(s)));
            }
            let mut r = row(fair);
            r.kind = "fair";
            Ok(Item::Lock(r))
        }
        Err(e) if e.kind() == distlock::ErrorKind::WrongType => {
            let (available, leased) = client
                .leased_semaphore(name)
                .permits()
                .await
                .with_context(|| format!("{name:?} is not a lock or a semaphore"))?;
            Ok(Item::Semaphore(SemaphoreRow {
                kind: "semaphore",
                name: name.to_string(),
                available_permits: available,
                leased_permits: leased,
            }))
        }
        Err(e) => Err(e.into()),
    }
}

#[derive(Serialize)]
struct JobRow {
    kind: &'static str,
    name: String,
    key: String,
    held: bool,
    host: Option<String>,
    locked_at: Option<String>,
    id: Option<String>,
    ttl_ms: Option<u64>,
}

/// `(env, job)` when `name` is a job-lock key or `--env` was given.
fn job_name<'a>(args: &'a StatusArgs, name: &'a str) -> Option<(&'a str, &'a str)> {
    if let Some(env) = &args.env {
        return Some((env.as_str(), name));
    }
    name.strip_prefix("job-lock:")?.split_once(':')
}

#[derive(Serialize)]
struct Holder {
    owner: String,
    hold_count: u64,
}

/// Who was granted a plain or fair lock, as the grant recorded it.
#[derive(Serialize)]
struct HolderInfo {
    owner: String,
    app: String,
    host: String,
    pid: u32,
    /// When it was granted: ms since the Unix epoch, by the server's clock (recorded in whole
    /// seconds).
    since_ms: u64,
    /// How long it has been held: now by this machine's clock − since, in ms.
    held_for_ms: u64,
}

/// `h` as shown, its age taken at `now` (0 when the server's clock is ahead of ours).
fn holder_info(h: distlock::HolderInfo, now: std::time::SystemTime) -> HolderInfo {
    let since_ms = h
        .since
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let held_for = now.duration_since(h.since).unwrap_or_default().as_millis() as u64;
    HolderInfo {
        owner: h.owner,
        app: h.app,
        host: h.host,
        pid: h.pid,
        since_ms,
        held_for_ms: held_for,
    }
}

/// `holder: app <app> on <host> pid <pid>, held for <age>` (age in whole seconds).
fn holder_line(h: &HolderInfo) -> String {
    let age = std::time::Duration::from_secs(h.held_for_ms / 1000);
    format!(
        "holder: app {} on {} pid {}, held for {}",
        h.app,
        h.host,
        h.pid,
        humantime::format_duration(age)
    )
}

#[derive(Serialize)]
struct Row {
    kind: &'static str,
    name: String,
    key: String,
    held: bool,
    holders: Vec<Holder>,
    /// Plain and fair locks held by a distlock client: who was granted it.
    #[serde(skip_serializing_if = "Option::is_none")]
    holder: Option<HolderInfo>,
    ttl_ms: Option<u64>,
    fencing_token: Option<u128>,
    fencing_counter: u128,
    waiting_clients: u64,
    /// Read-write locks: "read" or "write".
    #[serde(skip_serializing_if = "Option::is_none")]
    mode: Option<String>,
    /// Fair locks: waiting owners, first in line first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    queue: Vec<String>,
    /// Read-write locks: writers waiting.
    #[serde(skip_serializing_if = "Option::is_none")]
    waiting_writers: Option<u64>,
}

/// A semaphore (plain or leased): a string key of permits.
#[derive(Serialize)]
struct SemaphoreRow {
    kind: &'static str,
    name: String,
    available_permits: u64,
    leased_permits: u64,
}

pub async fn run(opts: &Options, args: StatusArgs) -> Result<u8> {
    if !args.redlock.is_empty() {
        return redlock_status(args).await;
    }
    let client = opts.client().await?;
    let mut items = Vec::new();
    for name in &args.names {
        if let Some((env, job)) = job_name(&args, name) {
            let lock = client.job_lock(job).environment(env);
            let holder = lock
                .status()
                .await
                .with_context(|| format!("status of job {job:?}"))?;
            items.push(Item::Job(JobRow {
                kind: "job",
                name: job.to_string(),
                key: lock.key(),
                held: holder.is_some(),
                ttl_ms: holder
                    .as_ref()
                    .and_then(|h| h.ttl)
                    .map(|t| t.as_millis() as u64),
                host: holder.as_ref().map(|h| h.host.clone()),
                locked_at: holder.as_ref().map(|h| h.locked_at.clone()),
                id: holder.and_then(|h| h.id),
            }));
            continue;
        }
        items.push(
            lock_item(&client, name)
                .await
                .with_context(|| format!("status of {name:?}"))?,
        );
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&items)?);
        return Ok(0);
    }
    print_items(items);
    if let Some(policy) = client.eviction_policy().filter(|p| *p != "noeviction") {
        // Lock keys carry TTLs: any eviction policy may drop a held lock.
        println!(
            "server maxmemory-policy {policy}: held locks can be evicted under memory \
             pressure (use noeviction on lock servers)"
        );
    }
    Ok(0)
}

fn print_items(items: Vec<Item>) {
    for item in items {
        match item {
            Item::Job(j) => print_job(&j),
            Item::Lock(r) => print_lock(&r),
            Item::Semaphore(s) => println!(
                "{} (semaphore): {} permits available, {} leased",
                s.name, s.available_permits, s.leased_permits
            ),
            Item::RedLock { name, nodes, .. } => {
                println!("{name} (RedLock over {} nodes):", nodes.len());
                for n in nodes {
                    match (n.view, n.error) {
                        (Some(r), _) if r.held => println!(
                            "  {}: held by {} (TTL {} ms)",
                            n.node,
                            r.holders.first().map(|h| h.owner.as_str()).unwrap_or("?"),
                            r.ttl_ms.unwrap_or(0)
                        ),
                        (Some(_), _) => println!("  {}: free", n.node),
                        (None, e) => {
                            println!("  {}: unreachable ({})", n.node, e.unwrap_or_default())
                        }
                    }
                }
            }
        }
    }
}

async fn redlock_status(args: StatusArgs) -> Result<u8> {
    let redlock = distlock::RedLock::builder_from_urls(args.redlock.iter().cloned())
        .build()
        .await
        .context("RedLock nodes")?;
    let mut items = Vec::new();
    for name in &args.names {
        let views = redlock
            .status(name)
            .await
            .with_context(|| format!("status of {name:?}"))?;
        let nodes = views
            .into_iter()
            .map(|(node, r)| match r {
                Ok(s) => NodeView {
                    node,
                    view: Some(row(s)),
                    error: None,
                },
                Err(e) => NodeView {
                    node,
                    view: None,
                    error: Some(format!("{e:#}")),
                },
            })
            .collect();
        items.push(Item::RedLock {
            kind: "redlock",
            name: name.clone(),
            nodes,
        });
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&items)?);
    } else {
        print_items(items);
    }
    Ok(0)
}

fn print_job(j: &JobRow) {
    match (&j.host, &j.locked_at) {
        (Some(host), Some(at)) => println!(
            "{} (job, {}): held by {host} since {at}, TTL {} ms",
            j.name,
            j.key,
            j.ttl_ms.unwrap_or(0)
        ),
        _ => println!("{} (job, {}): free", j.name, j.key),
    }
}

fn print_lock(r: &Row) {
    if !r.held {
        println!("{}: free (fencing counter {})", r.name, r.fencing_counter);
        return;
    }
    let ttl = r
        .ttl_ms
        .map(|ms| format!("{ms} ms"))
        .unwrap_or_else(|| "no TTL".into());
    println!("{}: held, TTL {ttl}", r.name);
    for h in &r.holders {
        println!("  owner {}  hold count {}", h.owner, h.hold_count);
    }
    if let Some(h) = &r.holder {
        println!("  {}", holder_line(h));
    }
    match r.fencing_token {
        Some(t) => println!("  fencing token {t}"),
        None => println!("  fencing token: none (holder is not a distlock client)"),
    }
    println!("  waiting clients {}", r.waiting_clients);
    if let Some(mode) = &r.mode {
        println!("  mode {mode}");
    }
    if let Some(w) = r.waiting_writers {
        println!("  waiting writers {w}");
    }
    if !r.queue.is_empty() {
        println!(
            "  queue ({} waiting): {}",
            r.queue.len(),
            r.queue.join(", ")
        );
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::{holder_info, holder_line};

    #[test]
    fn the_holder_line_shows_app_host_pid_and_whole_seconds() {
        let since = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let h = distlock::HolderInfo::parse("u:1", "billing;web-1;4242;1700000000").unwrap();
        let shown = holder_info(h.clone(), since + Duration::from_millis(3_723_900));
        assert_eq!(shown.since_ms, 1_700_000_000_000);
        assert_eq!(shown.held_for_ms, 3_723_900);
        assert_eq!(
            holder_line(&shown),
            "holder: app billing on web-1 pid 4242, held for 1h 2m 3s"
        );
        // A server clock ahead of ours: held for 0s, not an error.
        let ahead = holder_info(h, since - Duration::from_secs(5));
        assert_eq!(ahead.held_for_ms, 0);
        assert!(holder_line(&ahead).ends_with("held for 0s"));
    }
}
