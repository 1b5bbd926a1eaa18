//! Which locks exist: a bounded `SCAN` of the server (every master of a Cluster) for the keys
//! of distlock, Redisson and ShedLock — plain, fair and read-write locks, semaphores, latches
//! and job locks — each read back as one [`Entry`]. Shared by `distlock list`, `distlock
//! top` and `distlock status`.
//!
//! Read-only: the library says what a key is for by its name
//! ([`distlock::layout::classify`]) and what it holds by its shape
//! ([`distlock::Client::inspect`]); nothing is written. What the scan skips: the helper keys
//! of the locks (fair queues, unlock latches, fencing counters, lease sets — their content
//! is reported on the lock they belong to) and keys of other shapes (the application's own
//! data), which are only counted.

use std::time::{Duration, SystemTime};

use anyhow::{Context, Result};
use distlock::layout::{classify, KeyRole};
use distlock::{InspectedKind, Inspection};
use futures_util::stream::{self, StreamExt};
use serde::Serialize;

/// How many keys are read at once (each a few round trips): enough to hide latency, few
/// enough not to crowd the server.
const CONCURRENCY: usize = 32;

/// What a listed key is: the library's [`Kind`], whose name is the `KIND` column and the JSON
/// `kind`.
pub use distlock::kind::Kind;

/// `n` of `kind`, in words made of its name: `1 lock`, `3 leased semaphores`, `2 semaphores
/// or latches`.
pub fn count(kind: Kind, n: usize) -> String {
    let one = kind.as_str().replace('_', " ");
    if n == 1 {
        return format!("1 {one}");
    }
    let many = match kind {
        Kind::Latch => "latches".to_string(),
        Kind::SemaphoreOrLatch => "semaphores or latches".to_string(),
        _ => format!("{one}s"),
    };
    format!("{n} {many}")
}

/// The JSON `kind`: its name.
pub(crate) fn kind_name<S: serde::Serializer>(kind: &Kind, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(kind.as_str())
}

/// Who holds an entry, as its grant recorded it.
#[derive(Clone, Debug, Serialize)]
pub struct Holder {
    /// Application name (distlock holders only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub app: Option<String>,
    /// Host name.
    pub host: String,
    /// Process id (distlock holders only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// When it was granted, ms since the Unix epoch (the server's clock for locks, the
    /// holder's for job locks).
    pub since_ms: u64,
    /// How long it has been held, ms (this machine's clock − `since_ms`, 0 if negative).
    pub held_for_ms: u64,
}

impl Holder {
    /// How long it has been held.
    pub fn held_for(&self) -> Duration {
        Duration::from_millis(self.held_for_ms)
    }

    /// `app@host pid N`, or just the host.
    pub fn who(&self) -> String {
        match (&self.app, self.pid) {
            (Some(app), Some(pid)) => format!("{app}@{} pid {pid}", self.host),
            _ => self.host.clone(),
        }
    }
}

/// One owner of a lock and its hold count.
#[derive(Clone, Debug, Serialize)]
pub struct Owner {
    /// The owner field, `<client-uuid>:<owner-id>` (Redisson: `<uuid>:<thread-id>`).
    pub owner: String,
    /// Holds taken by this owner (re-entry counts).
    pub hold_count: u64,
}

/// One listed key.
#[derive(Clone, Debug, Serialize)]
pub struct Entry {
    /// What it is.
    #[serde(serialize_with = "kind_name")]
    pub kind: Kind,
    /// The name a distlock client opens it by (the key without the key prefix; for a job
    /// lock, the job's name).
    pub name: String,
    /// The Redis key.
    pub key: String,
    /// Job locks: the environment (`job-lock:<env>:<name>`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env: Option<String>,
    /// Whether someone holds it (locks and job locks; a semaphore with leased permits).
    pub held: bool,
    /// Owners with hold counts: locks only.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub owners: Vec<Owner>,
    /// Who holds it, when the grant recorded it (distlock plain and fair locks, job locks).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holder: Option<Holder>,
    /// Time left on the lease, ms; `None` when free or without TTL.
    pub ttl_ms: Option<u64>,
    /// Clients waiting: connections subscribed to its wake channel (one per waiting client;
    /// for a fair lock, one per waiter).
    pub waiting: u64,
    /// Fair locks: waiters in the queue.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue: Option<u64>,
    /// Fair locks: the waiting owners, first in line first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub queue_owners: Vec<String>,
    /// Read-write locks: writers waiting (distlock's write preference).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting_writers: Option<u64>,
    /// Read-write locks: `read` or `write` while held.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// The holder's fencing token (plain and fair locks held by distlock).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fencing_token: Option<u128>,
    /// The last token issued by the fencing counter the lock draws from (one per hash slot):
    /// rises by one with every grant in that slot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fencing_counter: Option<u128>,
    /// Semaphores: permits available; latches: the count.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<u64>,
    /// Leased semaphores: permits leased now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leased: Option<u64>,
}

impl Entry {
    /// Who holds it, as one comparable value (the fencing token, else the owners, else the
    /// job lock's value): a new value is a new grant. `None` when free.
    pub fn grant(&self) -> Option<String> {
        if !self.held {
            return None;
        }
        if let Some(t) = self.fencing_token {
            return Some(t.to_string());
        }
        if !self.owners.is_empty() {
            let owners: Vec<&str> = self.owners.iter().map(|o| o.owner.as_str()).collect();
            return Some(owners.join(","));
        }
        self.holder
            .as_ref()
            .map(|h| format!("{}@{}", h.since_ms, h.host))
    }

    pub fn new(kind: Kind, name: &str, key: &str) -> Entry {
        Entry {
            kind,
            name: name.to_string(),
            key: key.to_string(),
            env: None,
            held: false,
            owners: Vec::new(),
            holder: None,
            ttl_ms: None,
            waiting: 0,
            queue: None,
            queue_owners: Vec::new(),
            waiting_writers: None,
            mode: None,
            fencing_token: None,
            fencing_counter: None,
            value: None,
            leased: None,
        }
    }

    /// What state it is in, in a few words: `held`, `free`, `held (read)`, `3 available,
    /// 2 leased`, `count 4`.
    pub fn state(&self) -> String {
        match self.kind {
            Kind::Lock | Kind::FairLock | Kind::JobLock => {
                if self.held {
                    "held".into()
                } else {
                    "free".into()
                }
            }
            Kind::ReadLock | Kind::WriteLock => match (&self.mode, self.owners.len()) {
                (Some(mode), 1) => format!("held ({mode})"),
                (Some(mode), n) => format!("held ({mode}, {n} owners)"),
                (None, _) => "free".into(),
            },
            Kind::LeasedSemaphore | Kind::Semaphore => format!(
                "{} available{}",
                self.value.unwrap_or(0),
                self.leased
                    .map(|l| format!(", {l} leased"))
                    .unwrap_or_default()
            ),
            Kind::Latch => format!("count {}", self.value.unwrap_or(0)),
            Kind::SemaphoreOrLatch => format!("value {}", self.value.unwrap_or(0)),
            // A RedLock spans independent masters: no scan of one server lists it.
            _ => if self.held { "held" } else { "free" }.into(),
        }
    }

    /// The row of `distlock list`: name (with the job's environment), kind, state, holder,
    /// held for, TTL, waiting clients (with a fair lock's queue).
    pub fn cells(&self) -> [String; 7] {
        let name = match &self.env {
            Some(env) => format!("{} ({env})", self.name),
            None => self.name.clone(),
        };
        let waiting = match self.queue {
            Some(q) => format!("{} (queue {q})", self.waiting),
            None => self.waiting.to_string(),
        };
        [
            name,
            self.kind.as_str().to_string(),
            self.state(),
            self.who(),
            self.holder
                .as_ref()
                .map(|h| human_secs(h.held_for()))
                .unwrap_or_default(),
            self.ttl_ms
                .map(|t| human(Duration::from_millis(t)))
                .unwrap_or_default(),
            waiting,
        ]
    }

    /// Who holds it, shortly: `app@host pid N`, the owner field, or empty.
    pub fn who(&self) -> String {
        if let Some(h) = &self.holder {
            return h.who();
        }
        match self.owners.as_slice() {
            [] => String::new(),
            [o] => short_owner(&o.owner),
            [o, rest @ ..] => format!("{} +{}", short_owner(&o.owner), rest.len()),
        }
    }
}

/// An owner field `<client-uuid>:<owner-id>` shortened for a table: `82574a6d…:1` (the
/// whole field is in the JSON output).
fn short_owner(owner: &str) -> String {
    match owner.split_at_checked(36) {
        Some((id, rest)) if uuid::Uuid::parse_str(id).is_ok() => format!("{}…{rest}", &id[..8]),
        _ => owner.to_string(),
    }
}

/// What one scan found.
#[derive(Clone, Debug, Serialize)]
pub struct Inventory {
    /// The listed keys, sorted by name (then kind).
    pub entries: Vec<Entry>,
    /// Keys matched by the scan.
    pub matched_keys: usize,
    /// Matched keys not listed: helper keys of the listed ones and keys of other shapes.
    pub other_keys: usize,
    /// Whether the scan reached the end of every master (`false`: `--examine` stopped it).
    pub complete: bool,
    /// Keys not read (or not listed) because `--limit` entries were found: more may be
    /// locks.
    pub unread_keys: usize,
    /// Integer keys not listed (counted in `other_keys`) because nothing tells a semaphore or
    /// latch from the application's counters (`--all` lists them).
    pub unmarked_integers: usize,
    /// Keys that could not be read, with why (the others are still listed).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<KeyError>,
}

/// A key that could not be read.
#[derive(Clone, Debug, Serialize)]
pub struct KeyError {
    /// The Redis key.
    pub key: String,
    /// What went wrong.
    pub error: String,
}

/// What to scan for.
#[derive(Clone, Debug)]
pub struct Query {
    /// The key prefix (`--key-prefix`): only keys under it, shown without it.
    pub key_prefix: String,
    /// A `SCAN MATCH` glob over names (not keys); `None` for all.
    pub pattern: Option<String>,
    /// Keys looked at per master, at most (rounded up to whole `SCAN … COUNT 1000` calls).
    pub examine: usize,
    /// Entries listed at most (keys are read in order until this many are found).
    pub limit: usize,
    /// List integer keys that nothing marks as a semaphore or a latch (no waiter on their
    /// channels, no leases) too: they may as well be the application's counters. Without it
    /// they are listed only when the pattern names one key exactly.
    pub all: bool,
}

impl Query {
    /// Whether the pattern names one key exactly (no glob characters): then whatever it is
    /// is shown.
    fn names_one_key(&self) -> bool {
        self.pattern
            .as_deref()
            .is_some_and(|p| !p.contains(['*', '?', '[', '\\']))
    }
}

/// Scan for the keys of `query` and read each one.
///
/// # Errors
/// A server that cannot be reached or refuses `SCAN`. A key whose read fails is reported in
/// [`Inventory::errors`]; one that vanishes or changes type meanwhile is left out.
pub async fn scan(client: &distlock::Client, query: &Query) -> Result<Inventory> {
    let prefix = glob_escape(&query.key_prefix);
    let name_glob = query.pattern.as_deref().unwrap_or("*");
    let mut patterns = vec![format!("{prefix}{name_glob}")];
    if query.pattern.is_some() {
        // Job locks live under `job-lock:<env>:<name>`: the pattern is over the job's name.
        patterns.push(format!("{prefix}job-lock:*:{name_glob}"));
    }
    let mut keys = Vec::new();
    let mut complete = true;
    for pattern in &patterns {
        let found = client
            .scan(pattern, query.examine)
            .await
            .context("scanning for lock keys")?;
        complete &= found.complete;
        keys.extend(found.keys);
    }
    keys.sort();
    keys.dedup();
    let matched_keys = keys.len();
    let candidates: Vec<(String, String)> = keys
        .into_iter()
        .filter_map(|key| {
            let name = key.strip_prefix(&query.key_prefix)?.to_string();
            let helper = matches!(classify(&name), KeyRole::Helper { .. });
            (!helper).then_some((key, name))
        })
        .collect();
    let now = SystemTime::now();
    // Read in key order, a chunk at a time, until `limit` entries are found: keys of other
    // shapes (the application's data) cost a `TYPE` each and do not count.
    let mut entries = Vec::new();
    let mut errors = Vec::new();
    let mut read = 0;
    let show_unmarked = query.all || query.names_one_key();
    let mut unmarked_integers = 0;
    for chunk in candidates.chunks(CONCURRENCY * 8) {
        if entries.len() >= query.limit {
            break;
        }
        let results: Vec<(&String, Result<Option<Entry>>)> = stream::iter(chunk)
            .map(|(key, name)| async move { (key, read_key(client, name, now).await) })
            .buffered(CONCURRENCY)
            .collect()
            .await;
        read += chunk.len();
        for (key, r) in results {
            match r {
                Ok(Some(e)) if e.kind == Kind::SemaphoreOrLatch && !show_unmarked => {
                    unmarked_integers += 1;
                }
                Ok(Some(e)) => entries.push(e),
                Ok(None) => {}
                Err(e) => errors.push(KeyError {
                    key: key.clone(),
                    error: format!("{e:#}"),
                }),
            }
        }
    }
    let mut unread_keys = candidates.len() - read;
    if entries.len() > query.limit {
        // Listed in key order: the last of the chunk go unlisted too.
        unread_keys += entries.len() - query.limit;
        entries.truncate(query.limit);
    }
    entries.sort_by(|a, b| (&a.name, a.kind).cmp(&(&b.name, b.kind)));
    Ok(Inventory {
        other_keys: matched_keys - unread_keys - entries.len() - errors.len(),
        errors,
        entries,
        matched_keys,
        complete,
        unread_keys,
        unmarked_integers,
    })
}

/// `s` with the glob characters of `SCAN MATCH` escaped.
pub fn glob_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// One key as an [`Entry`], or `None` when it is not of the lock family (or vanished).
async fn read_key(client: &distlock::Client, name: &str, now: SystemTime) -> Result<Option<Entry>> {
    match client.inspect(name).await {
        // Gone since the scan found it.
        Ok(i) if matches!(i.kind, InspectedKind::Free(_)) => Ok(None),
        Ok(i) if matches!(i.kind, InspectedKind::Job { holder: None, .. }) => Ok(None),
        Ok(i) => entry(i, now).map(Some),
        // Of another shape: the application's data.
        Err(e) if e.kind() == distlock::ErrorKind::WrongType => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The library's inspection of a name as the entry `list`, `top` and `status` print.
///
/// # Errors
/// A kind of key the library knows and this CLI does not.
pub fn entry(i: Inspection, now: SystemTime) -> Result<Entry> {
    let waiting = i.waiters;
    // The library names the kind; each arm below fills in what only that kind has.
    let kind = i.kind.kind();
    let mut e = match i.kind {
        InspectedKind::Free(s) => {
            let mut e = Entry::new(kind, &i.name, &i.key);
            e.fencing_counter = Some(s.fencing_counter);
            e.waiting = s.subscribers;
            return Ok(e);
        }
        InspectedKind::Lock(s) => lock_entry(s, &i.name, now),
        InspectedKind::FairLock(s) => {
            let queue = s.queue.clone();
            let mut e = lock_entry(s, &i.name, now);
            e.queue = Some(queue.len() as u64);
            e.queue_owners = queue;
            e
        }
        InspectedKind::RwLock(s) => {
            let (mode, writers) = (s.mode, s.waiting_writers);
            let mut e = lock_entry(s, &i.name, now);
            e.mode = mode.map(|m| m.to_string());
            e.waiting_writers = Some(writers);
            e
        }
        InspectedKind::Semaphore { permits } => {
            let mut e = Entry::new(kind, &i.name, &i.key);
            e.value = Some(permits);
            e
        }
        InspectedKind::LeasedSemaphore { permits, leased } => {
            let mut e = Entry::new(kind, &i.name, &i.key);
            e.value = Some(permits);
            e.leased = Some(leased);
            e.held = leased > 0;
            e
        }
        InspectedKind::Latch { count } => {
            let mut e = Entry::new(kind, &i.name, &i.key);
            e.value = Some(count);
            e
        }
        InspectedKind::SemaphoreOrLatch { value } => {
            let mut e = Entry::new(kind, &i.name, &i.key);
            e.value = Some(value);
            e
        }
        InspectedKind::Job { env, name, holder } => {
            let mut e = Entry::new(kind, &name, &i.key);
            e.env = Some(env);
            if let Some(h) = holder {
                e.held = true;
                e.ttl_ms = h.ttl.map(|t| t.as_millis() as u64);
                e.holder = Some(job_holder(h, now));
            }
            return Ok(e);
        }
        other => anyhow::bail!("{:?} holds a kind this CLI does not know: {other:?}", i.key),
    };
    e.kind = kind;
    e.waiting = waiting;
    Ok(e)
}

/// A job lock's holder as an entry's.
fn job_holder(h: distlock::JobHolder, now: SystemTime) -> Holder {
    let since = humantime::parse_rfc3339_weak(h.locked_at.trim_end_matches('Z')).ok();
    Holder {
        app: None,
        host: h.host,
        pid: None,
        since_ms: since
            .and_then(|s| s.duration_since(SystemTime::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_millis() as u64),
        held_for_ms: since
            .and_then(|s| now.duration_since(s).ok())
            .map_or(0, |d| d.as_millis() as u64),
    }
}

/// A lock's status as an entry of kind `lock` (the caller sets a fair or read-write lock's
/// kind and fields), listed under `name`.
pub fn lock_entry(s: distlock::LockStatus, name: &str, now: SystemTime) -> Entry {
    let mut e = Entry::new(Kind::Lock, name, &s.key);
    e.held = !s.holders.is_empty();
    e.ttl_ms = s.ttl.map(|t| t.as_millis() as u64);
    e.waiting = s.subscribers;
    e.fencing_token = s.fencing_token.map(|t| t.get());
    e.fencing_counter = Some(s.fencing_counter);
    e.holder = s.holder.map(|h| {
        let since_ms = h
            .since
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis() as u64;
        Holder {
            app: Some(h.app),
            host: h.host,
            pid: Some(h.pid),
            since_ms,
            held_for_ms: now.duration_since(h.since).unwrap_or_default().as_millis() as u64,
        }
    });
    e.owners = s
        .holders
        .into_iter()
        .map(|(owner, hold_count)| Owner { owner, hold_count })
        .collect();
    e
}

/// The entry of the lock-family name `name` (the key prefix added), as `list` shows it;
/// a name with no key is a free lock, with its fencing counter. `status` uses it, so the
/// three commands describe a lock alike.
///
/// # Errors
/// A key of another type or shape ("the key holds …"); server failures.
pub async fn read_name(client: &distlock::Client, name: &str, now: SystemTime) -> Result<Entry> {
    entry(client.inspect(name).await?, now)
}

/// The entry of the job lock `job` of `env`, free or held.
///
/// # Errors
/// A key of another type or value; server failures.
pub async fn read_job(
    client: &distlock::Client,
    env: &str,
    job: &str,
    now: SystemTime,
) -> Result<Entry> {
    entry(client.inspect_job(env, job).await?, now)
}

/// A duration as people read it, to the second (`1h 2m 3s`, `850ms` below a second).
pub fn human(d: Duration) -> String {
    let shown = if d >= Duration::from_secs(1) {
        Duration::from_secs(d.as_secs())
    } else {
        Duration::from_millis(d.as_millis() as u64)
    };
    humantime::format_duration(shown).to_string()
}

/// A duration in whole seconds (`1m 5s`): for ages recorded to the second.
pub fn human_secs(d: Duration) -> String {
    humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_are_shortened_to_the_client_id_prefix() {
        assert_eq!(
            short_owner("82574a6d-1653-4c33-8d68-2a409a40c8af:1"),
            "82574a6d…:1"
        );
        assert_eq!(short_owner("not-a-uuid:1"), "not-a-uuid:1");
    }

    #[test]
    fn human_durations_round_to_the_second_above_one() {
        assert_eq!(human(Duration::from_millis(3_723_900)), "1h 2m 3s");
        assert_eq!(human(Duration::from_millis(850)), "850ms");
        assert_eq!(human(Duration::ZERO), "0s");
    }
}
