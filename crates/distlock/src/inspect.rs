//! [`Client::inspect`] and [`Client::inspect_job`]: what a name holds, read back from its
//! key's shape, for tools (`distlock status`, `list`, `top`).

use std::time::{Duration, SystemTime};

use crate::error::{Error, ErrorKind, Result};
use crate::job::JobHolder;
use crate::keys;
use crate::kind::Kind;
use crate::layout::{self, KeyRole};
use crate::lock::{LockMode, LockStatus};
use crate::scripts::Publish;
use crate::Client;

/// A hash with more fields than this is not read as a lock (a lock has one field per owner,
/// plus the fencing-token and holder fields), so it is not read whole.
const MAX_LOCK_FIELDS: u64 = 1_000;

/// What [`Client::inspect`] or [`Client::inspect_job`] found under a name.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Inspection {
    /// The name: the key without the client's key prefix (for a job lock,
    /// `job-lock:<env>:<name>`).
    pub name: String,
    /// The Redis key.
    pub key: String,
    /// What the key is, with what only that kind has.
    pub kind: InspectedKind,
    /// Time left on the key: a lock's or a job lock's lease. `None` without a key or
    /// without a TTL.
    pub ttl: Option<Duration>,
    /// Connections waiting: subscribers of the kind's wake channel.
    ///
    /// Counted by `PUBSUB NUMSUB`, plus `PUBSUB SHARDNUMSUB` where waiters use sharded pub/sub:
    /// one per waiting client; for a fair lock at least its queue's length (each waiter has a
    /// channel of its own). 0 for a job lock (its holder's guard listens on a notice channel;
    /// nobody waits).
    pub waiters: u64,
}

/// The kinds of [`Inspection`].
///
/// Semaphores and latches are integer strings in Redisson's layouts: a waiter on one of the
/// two wake channels, or a lease set, tells which; without them nothing does
/// ([`InspectedKind::SemaphoreOrLatch`]). A fair lock without waiters is laid out as a plain
/// lock, so it is reported as one.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum InspectedKind {
    /// No key: a free lock (or an unused semaphore or latch), with the lock's status.
    ///
    /// The fencing counter its grants draw from and the subscribers of its wake channel.
    Free(LockStatus),
    /// A plain lock (Redisson `RLock`'s hash), or a fair lock without waiters.
    Lock(LockStatus),
    /// A fair lock with waiters in its queue (Redisson `RFairLock`): [`LockStatus::queue`].
    FairLock(LockStatus),
    /// A read-write lock (Redisson `RReadWriteLock`: a hash with a `mode` field), with its
    /// mode and [`LockStatus::waiting_writers`].
    RwLock(LockStatus),
    /// A semaphore (Redisson `RSemaphore`), known by a waiter on its wake channel.
    Semaphore {
        /// Permits available.
        permits: u64,
    },
    /// A semaphore with leased permits (Redisson `RPermitExpirableSemaphore`), known by its
    /// lease set.
    LeasedSemaphore {
        /// Permits available.
        permits: u64,
        /// Permits leased now (leases not yet expired, by this machine's clock).
        leased: u64,
    },
    /// A count-down latch (Redisson `RCountDownLatch`), known by a waiter on its channel.
    Latch {
        /// The count.
        count: u64,
    },
    /// A non-negative integer string with no waiter and no lease set.
    ///
    /// A semaphore or a count-down latch (the two share one layout), or the application's own
    /// counter.
    SemaphoreOrLatch {
        /// The value.
        value: u64,
    },
    /// A job lock (ShedLock's `job-lock:<env>:<name>`).
    Job {
        /// The environment.
        env: String,
        /// The job's name.
        name: String,
        /// Who holds it; `None` when free.
        holder: Option<JobHolder>,
    },
}

impl InspectedKind {
    /// Returns the name of its [`kind`](Self::kind), as spans, metrics and the `distlock`
    /// command name it.
    pub fn as_str(&self) -> &'static str {
        self.kind().as_str()
    }

    /// The kind of primitive it is ([`Kind`]): a free name and a fair lock with nobody
    /// queued read as [`Kind::Lock`], a read-write lock as the side it is held in.
    pub fn kind(&self) -> Kind {
        match self {
            InspectedKind::Free(_) | InspectedKind::Lock(_) => Kind::Lock,
            InspectedKind::FairLock(_) => Kind::FairLock,
            InspectedKind::RwLock(s) => match s.mode {
                Some(LockMode::Write) => Kind::WriteLock,
                _ => Kind::ReadLock,
            },
            InspectedKind::Semaphore { .. } => Kind::Semaphore,
            InspectedKind::LeasedSemaphore { .. } => Kind::LeasedSemaphore,
            InspectedKind::Latch { .. } => Kind::Latch,
            InspectedKind::SemaphoreOrLatch { .. } => Kind::SemaphoreOrLatch,
            InspectedKind::Job { .. } => Kind::JobLock,
        }
    }
}

impl Inspection {
    /// Returns whether someone holds it.
    ///
    /// A lock with an owner, a job lock with a holder, a leased semaphore with permits leased.
    pub fn is_held(&self) -> bool {
        match &self.kind {
            InspectedKind::Lock(s) | InspectedKind::FairLock(s) | InspectedKind::RwLock(s) => {
                !s.holders.is_empty()
            }
            InspectedKind::LeasedSemaphore { leased, .. } => *leased > 0,
            InspectedKind::Job { holder, .. } => holder.is_some(),
            _ => false,
        }
    }
}

/// What the first round trip reads of any key.
struct Shape {
    /// `TYPE`: `none`, `string`, `hash`, …
    redis_type: String,
    /// `PTTL`: -2 without a key, -1 without a TTL.
    pttl: i64,
    /// `OBJECT ENCODING`: `int` for an integer string.
    encoding: Option<String>,
    /// `HLEN`, for a hash.
    fields: Option<u64>,
    /// Whether a hash has a `mode` field (a read-write lock).
    has_mode: bool,
}

impl Client {
    /// Returns what the name `name` holds, read from its key's shape.
    ///
    /// A lock (plain, fair or read-write, with owners and hold counts, who was granted it, the
    /// fencing token and counter, the fair queue or the waiting writers), a semaphore (plain or
    /// leased), a latch, a job lock (for a name `job-lock:<env>:<job>`), or nothing ([`Free`]).
    ///
    /// The client's key prefix is added to `name`. Read-only. One pipeline reads the key's
    /// `TYPE`, `PTTL`, `OBJECT ENCODING`, `HLEN` and whether it has a `mode` field; then the
    /// kind's own reads: a lock's is its [`status`](crate::Lock::status) (a read-write lock's
    /// waiters are the subscribers of its own channel); an integer string's value, lease set
    /// and both wake channels' subscribers are one more pipeline; a job lock's is
    /// [`JobLock::status`](crate::JobLock::status). The reads are not atomic with respect
    /// to each other: a key that changes meanwhile may be reported in its later shape, or
    /// fail with [`ErrorKind::WrongType`].
    ///
    /// [`Free`]: InspectedKind::Free
    ///
    /// # Errors
    /// [`ErrorKind::WrongType`] when the key holds something that is none of these (another
    /// type; a hash without a lock's owner fields or with more than 1000 fields; a string
    /// that is not a non-negative integer), the message naming the key's type;
    /// [`ErrorKind::InvalidInput`] for an empty or too long name (a free name or a lock must
    /// also be a valid lock name); [`ErrorKind::UnexpectedReply`] when a job lock's key holds
    /// a string that is not a ShedLock value, or a fencing counter is not a number; server
    /// failures.
    ///
    /// # Cancel safety
    /// Cancel safe: read-only.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn f(client: distlock::Client) -> distlock::Result<()> {
    /// use distlock::InspectedKind;
    ///
    /// let found = client.inspect("orders").await?;
    /// match &found.kind {
    ///     InspectedKind::Lock(s) => println!("held by {:?}, TTL {:?}", s.holders, found.ttl),
    ///     InspectedKind::Free(_) => println!("free"),
    ///     other => println!("{other:?}, {} waiting", found.waiters),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn inspect(&self, name: &str) -> Result<Inspection> {
        keys::check_name_len(name)?;
        let key = format!("{}{name}", self.key_prefix());
        let shape = self.shape(&key).await?;
        let ttl = ttl(shape.pttl);
        match shape.redis_type.as_str() {
            "none" => {
                if let KeyRole::Job { env, name: job } = layout::classify(name) {
                    return Ok(job_inspection(name, key, env, job, None));
                }
                let status = self.lock(name).status().await?;
                let waiters = status.subscribers;
                Ok(Inspection {
                    name: name.to_string(),
                    key,
                    kind: InspectedKind::Free(status),
                    ttl: None,
                    waiters,
                })
            }
            "hash" => self.inspect_hash(name, key, &shape).await,
            "string" => {
                if let KeyRole::Job { env, name: job } = layout::classify(name) {
                    return self.inspect_job(&env, &job).await;
                }
                if shape.encoding.as_deref() != Some("int") {
                    return Err(not_distlock(&shape.redis_type));
                }
                let (kind, waiters) = self.inspect_integer(&key).await?;
                Ok(Inspection {
                    name: name.to_string(),
                    key,
                    kind,
                    ttl,
                    waiters,
                })
            }
            other => Err(not_distlock(other)),
        }
    }

    /// Returns the job lock `name` of the environment `env` (ShedLock's `job-lock:<env>:<name>`).
    ///
    /// Free or held, it is read as [`JobLock::status`](crate::JobLock::status) reads it, in one
    /// round trip.
    ///
    /// # Errors
    /// As [`JobLock::status`](crate::JobLock::status): [`ErrorKind::InvalidInput`] for an
    /// empty or too long name; [`ErrorKind::WrongType`] when the key holds
    /// another type; [`ErrorKind::UnexpectedReply`] for a string that is not a ShedLock
    /// value; server failures.
    ///
    /// # Cancel safety
    /// Cancel safe: read-only.
    pub async fn inspect_job(&self, env: &str, name: &str) -> Result<Inspection> {
        let lock = self.job_lock(name).environment(env);
        let holder = lock.status().await?;
        Ok(job_inspection(
            &layout::job_lock(env, name),
            lock.key(),
            env.to_string(),
            name.to_string(),
            holder,
        ))
    }

    /// `TYPE`, `PTTL`, `OBJECT ENCODING`, `HLEN` and `HEXISTS mode` of `key`, in one pipeline
    /// (the last two fail on other types than a hash: their errors are read as "no").
    async fn shape(&self, key: &str) -> Result<Shape> {
        let mut pipe = redis::pipe();
        pipe.ignore_errors()
            .cmd("TYPE")
            .arg(key)
            .cmd("PTTL")
            .arg(key)
            .cmd("OBJECT")
            .arg("ENCODING")
            .arg(key)
            .cmd("HLEN")
            .arg(key)
            .cmd("HEXISTS")
            .arg(key)
            .arg("mode");
        #[allow(clippy::type_complexity)]
        let (redis_type, pttl, encoding, fields, has_mode): (
            redis::RedisResult<String>,
            redis::RedisResult<i64>,
            redis::RedisResult<Option<String>>,
            redis::RedisResult<u64>,
            redis::RedisResult<bool>,
        ) = self
            .backend()
            .pipeline(format_args!("inspect {key:?}"), &pipe)
            .await?;
        let context = format!("inspect {key:?}");
        Ok(Shape {
            redis_type: redis_type.map_err(|e| Error::from_redis(&context, e))?,
            pttl: pttl.map_err(|e| Error::from_redis(&context, e))?,
            encoding: encoding.unwrap_or_default(),
            fields: fields.ok(),
            has_mode: has_mode.unwrap_or(false),
        })
    }

    /// A hash: a lock (plain, fair or read-write) when its fields are a lock's.
    async fn inspect_hash(&self, name: &str, key: String, shape: &Shape) -> Result<Inspection> {
        let fields = shape.fields.unwrap_or(0);
        if fields == 0 || fields > MAX_LOCK_FIELDS {
            return Err(not_distlock("hash"));
        }
        // A read-write lock's waiters listen on its own channel and its status counts its
        // waiting writers; a fair lock's status is a plain lock's plus its queue.
        let status = if shape.has_mode {
            self.rw_lock(name).status().await?
        } else {
            self.fair_lock(name).status().await?
        };
        if status.holders.is_empty() && status.mode.is_none() {
            // Gone since the first read: free now.
            let waiters = status.subscribers;
            return Ok(Inspection {
                name: name.to_string(),
                key,
                kind: InspectedKind::Free(status),
                ttl: None,
                waiters,
            });
        }
        // A lock's owner fields are `<client-uuid>:<owner-id>` (Redisson's and distlock's).
        let is_lock = status.mode.is_some()
            || status.fencing_token.is_some()
            || status.holder.is_some()
            || status.holders.iter().any(|(owner, _)| {
                owner
                    .get(..36)
                    .is_some_and(|id| uuid::Uuid::parse_str(id).is_ok())
            });
        if !is_lock {
            return Err(not_distlock("hash"));
        }
        let (ttl, mut waiters) = (status.ttl, status.subscribers);
        let kind = if status.mode.is_some() {
            InspectedKind::RwLock(status)
        } else if status.queue.is_empty() {
            InspectedKind::Lock(status)
        } else {
            waiters = waiters.max(status.queue.len() as u64);
            InspectedKind::FairLock(status)
        };
        Ok(Inspection {
            name: name.to_string(),
            key,
            kind,
            ttl,
            waiters,
        })
    }

    /// An integer string: a semaphore or a latch, told apart by its lease set and the
    /// waiters on either wake channel; with its waiters.
    async fn inspect_integer(&self, key: &str) -> Result<(InspectedKind, u64)> {
        let leases = keys::semaphore_leases(key);
        let channels = [keys::semaphore_channel(key), keys::latch_channel(key)];
        let now_ms = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis() as u64;
        // One round trip: the key, its lease set and the semaphore's channel share a hash
        // slot; the latch's channel does too unless the key has a hash tag (Redisson puts
        // braces around the whole key), then it is asked apart.
        let sharded = self.backend().publish() != Publish::Classic;
        let latch_apart = keys::key_slot(&channels[1]) != keys::key_slot(key);
        let mut pipe = redis::pipe();
        pipe.cmd("GET")
            .arg(key)
            .cmd("EXISTS")
            .arg(&leases)
            .cmd("ZCOUNT")
            .arg(&leases)
            .arg(now_ms)
            .arg("+inf")
            .cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(&channels[..]);
        if sharded {
            pipe.cmd("PUBSUB").arg("SHARDNUMSUB");
            if latch_apart {
                pipe.arg(&channels[0]);
            } else {
                pipe.arg(&channels[..]);
            }
        }
        let context = format!("inspect {key:?}");
        let mut replies: Vec<redis::Value> = self.backend().pipeline(&context, &pipe).await?;
        let sharded_counts = if sharded { replies.pop() } else { None };
        let (value, has_leases, leased, mut counts): (
            Option<String>,
            bool,
            u64,
            Vec<(String, u64)>,
        ) = redis::from_redis_value(redis::Value::Array(replies))
            .map_err(|e| Error::unexpected(format!("{context}: {e}")))?;
        if let Some(v) = sharded_counts {
            counts.extend(redis::from_redis_value::<Vec<(String, u64)>>(v).unwrap_or_default());
        }
        if sharded && latch_apart {
            // On the master of the latch channel's slot; a server without sharded pub/sub
            // has no such subscribers.
            let mut cmd = redis::cmd("PUBSUB");
            cmd.arg("SHARDNUMSUB").arg(&channels[1]);
            let apart: Result<Vec<(String, u64)>> = self.backend().query(&context, &cmd).await;
            counts.extend(apart.unwrap_or_default());
        }
        let subscribers = |channel: &str| -> u64 {
            counts
                .iter()
                .filter(|(c, _)| c == channel)
                .map(|(_, n)| n)
                .sum()
        };
        let (sem_waiting, latch_waiting) = (subscribers(&channels[0]), subscribers(&channels[1]));
        let Some(value) = value.and_then(|v| v.parse::<u64>().ok()) else {
            return Err(not_distlock("string"));
        };
        Ok(if has_leases {
            (
                InspectedKind::LeasedSemaphore {
                    permits: value,
                    leased,
                },
                sem_waiting,
            )
        } else if latch_waiting > 0 {
            (InspectedKind::Latch { count: value }, latch_waiting)
        } else if sem_waiting > 0 {
            (InspectedKind::Semaphore { permits: value }, sem_waiting)
        } else {
            (InspectedKind::SemaphoreOrLatch { value }, 0)
        })
    }
}

/// A job lock's inspection.
fn job_inspection(
    name: &str,
    key: String,
    env: String,
    job: String,
    holder: Option<JobHolder>,
) -> Inspection {
    Inspection {
        name: name.to_string(),
        key,
        ttl: holder.as_ref().and_then(|h| h.ttl),
        waiters: 0,
        kind: InspectedKind::Job {
            env,
            name: job,
            holder,
        },
    }
}

/// A PTTL reply as a TTL: `None` for -1 (no TTL) and -2 (no key).
fn ttl(pttl: i64) -> Option<Duration> {
    u64::try_from(pttl).ok().map(Duration::from_millis)
}

/// The error of a key that holds none of distlock's shapes.
fn not_distlock(redis_type: &str) -> Error {
    Error::new(
        ErrorKind::WrongType,
        format!("the key holds a {redis_type} that is not a lock, a semaphore or a latch"),
    )
}
