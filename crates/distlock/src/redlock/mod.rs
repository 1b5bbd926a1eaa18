//! [`RedLock`]: rounds, quorum and validity over independent masters.

mod builder;
mod guard;

pub use builder::RedLockBuilder;
pub use guard::RedLockGuard;

use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::client::Client;
use crate::conn::redact_url;
use crate::error::{Error, ErrorKind, NodeFailure, NotHeldReason, Result};
use crate::keys;
use crate::lock::{Attempt, FencingToken, LockStatus, Mode, Owner};

/// One independent master.
struct Node {
    /// The URL as given (may carry a password: never shown).
    url: Option<String>,
    redacted: String,
    client: Mutex<Option<Client>>,
}

impl Node {
    async fn client(&self, timeout: Duration) -> Result<Client> {
        let connected = self.client.lock().unwrap().clone();
        if let Some(c) = connected {
            return Ok(c);
        }
        let url = self
            .url
            .as_deref()
            .expect("a node without client has a URL");
        let c = Client::builder()
            .url(url)
            .connect_timeout(timeout)
            .build()
            .await?;
        *self.client.lock().unwrap() = Some(c.clone());
        Ok(c)
    }
}

struct Inner {
    nodes: Vec<Node>,
    ttl: Duration,
    drift_factor: f64,
    node_timeout: Duration,
    default_wait: Duration,
    retry_delay: (Duration, Duration),
    quorum: usize,
    max_extensions: Option<u32>,
}

/// A Redlock over independent masters. Cheap to clone.
///
/// # The algorithm, as implemented
/// 1. Take a monotonic start time; mint a fresh owner.
/// 2. Send the acquire to all N nodes in parallel, each bounded by the node timeout (≪ TTL).
///    Each node runs the same script as [`Lock`](crate::Lock) (Redisson hash layout, one hold,
///    PEXPIRE = TTL).
/// 3. Succeed iff at least a quorum (N/2 + 1 unless set) granted and the validity
///    `TTL − elapsed − drift` is positive, drift = TTL × drift factor (0.01) + 2 ms.
///    Stop waiting as soon as a quorum has become impossible.
/// 4. On failure release on **all** nodes, including those that did not answer: every node's
///    request runs in its own task, which, once its node answers (however late), releases a
///    grant that was not counted. A node that never answers keeps its grant until the TTL.
/// 5. Retry after a random delay (so competing clients desynchronise), until the caller's
///    wait has passed: [`RedLock::try_acquire`] makes one round, [`RedLock::try_acquire_for`]
///    rounds within a wait, [`RedLock::acquire`] within the default wait (60 s).
///
/// Extensions ([`RedLockGuard::extend`](crate::Lease::extend)) count only if a quorum extends within the validity;
/// their number can be bounded.
///
/// # When to prefer one master with replicas
/// Redisson deprecated its RedLock: for most services a single master (with Sentinel or
/// Cluster failover), replica acknowledgement of writes, and the [fencing
/// tokens](crate::FencingToken) of [`Lock`](crate::Lock) give the same or better safety with one
/// round trip instead of N. Martin Kleppmann's argument: Redlock's safety rests on timing
/// assumptions — bounded network delay, bounded process pauses, bounded clock drift — that real
/// systems break (a GC pause or a jumped clock lets two clients believe they hold the lock), and
/// since Redlock issues no monotonic token, the protected resource cannot tell the stale holder
/// from the new one; a lock that needs correctness needs fencing, and with fencing a single
/// master suffices. antirez's reply: Redlock checks elapsed time after acquiring, so pauses
/// before that are caught; pauses after it hurt every lease-based lock alike; and it needs only
/// that clocks advance at roughly the same rate (monotonic clocks, no large jumps), not that they
/// agree. Use RedLock when the nodes must be independent (no replication) and you accept its
/// timing assumptions; use `Lock` with fencing tokens when the resource can check them.
///
/// # Operating the nodes
/// A node that restarts without the keys it granted lets a second client get a quorum while the
/// first still believes it holds the lock. Run every node with `appendonly yes` and
/// `appendfsync always`, or delay every restart by more than the longest TTL in use.
///
/// # Examples
/// ```no_run
/// use distlock::{Lease, Release};
/// # async fn f() -> distlock::Result<()> {
/// use std::time::Duration;
/// let nodes = distlock::RedLockNodes::builder_from_urls([
///     "redis://10.0.0.1/", "redis://10.0.0.2/", "redis://10.0.0.3/",
/// ])
/// .ttl(Duration::from_secs(10))
/// .build()
/// .await?;
/// let redlock = nodes.lock("payments");
/// if let Some(guard) = redlock.try_acquire().await? {
///     // work within guard.valid_until()
///     guard.release().await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedLock {
    nodes: RedLockNodes,
    name: Arc<str>,
}

/// The independent masters a [`RedLock`] runs on, with its settings.
///
/// The settings are the quorum, TTL, node timeout and default wait. Build it once with
/// [`RedLockNodes::builder`] or [`RedLockNodes::builder_from_urls`]; then
/// [`RedLockNodes::lock`] names a lock, as [`Client::lock`] does on one deployment
/// (go-redsync's `Redsync` and `NewMutex`). Cheap to clone.
#[derive(Clone)]
pub struct RedLockNodes {
    inner: Arc<Inner>,
}

impl fmt::Debug for RedLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedLock")
            .field("name", &self.name)
            .field("nodes", &self.nodes)
            .finish()
    }
}

impl fmt::Debug for RedLockNodes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedLockNodes")
            .field(
                "nodes",
                &self
                    .inner
                    .nodes
                    .iter()
                    .map(|n| &n.redacted)
                    .collect::<Vec<_>>(),
            )
            .field("quorum", &self.inner.quorum)
            .field("ttl", &self.inner.ttl)
            .field("node_timeout", &self.inner.node_timeout)
            .field("default_wait", &self.inner.default_wait)
            .finish()
    }
}

impl RedLockNodes {
    /// A builder over connected clients, one per independent master.
    pub fn builder(nodes: impl IntoIterator<Item = Client>) -> RedLockBuilder {
        RedLockBuilder::new(
            nodes
                .into_iter()
                .map(|c| Node {
                    url: None,
                    redacted: c.redacted_url().to_string(),
                    client: Mutex::new(Some(c)),
                })
                .collect(),
        )
    }

    /// Returns a builder over server URLs.
    ///
    /// [`RedLockBuilder::build`] connects to them; a node that cannot be reached then is tried
    /// again at every acquire (and counts as failed until it answers).
    pub fn builder_from_urls<S: Into<String>>(urls: impl IntoIterator<Item = S>) -> RedLockBuilder {
        RedLockBuilder::new(
            urls.into_iter()
                .map(|u| {
                    let url = u.into();
                    Node {
                        redacted: redact_url(&url),
                        url: Some(url),
                        client: Mutex::new(None),
                    }
                })
                .collect(),
        )
    }

    /// The RedLock called `name` on these nodes. No I/O.
    pub fn lock(&self, name: impl Into<String>) -> RedLock {
        RedLock {
            nodes: self.clone(),
            name: name.into().into(),
        }
    }

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        self.inner.nodes.len()
    }

    /// Grants needed for a lock.
    pub fn quorum(&self) -> usize {
        self.inner.quorum
    }

    /// The TTL set on every node.
    pub fn ttl(&self) -> Duration {
        self.inner.ttl
    }
}

impl RedLock {
    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The nodes it runs on, with their settings (quorum, TTL).
    pub fn nodes(&self) -> &RedLockNodes {
        &self.nodes
    }

    /// Tries one round: `Ok(None)` when other owners hold the lock on too many nodes for a quorum.
    ///
    /// Contention is not an error.
    ///
    /// The acquire goes to every node in parallel, each bounded by the node timeout; the lock
    /// is won when a quorum granted and validity is left (TTL − elapsed − drift). A lost round
    /// releases on every node, including grants that arrive late.
    ///
    /// # Errors
    /// [`ErrorKind::QuorumNotReached`] when node failures (unreachable, timed out, errors) or
    /// a validity used up by slow nodes kept the quorum from being reached;
    /// [`Error::node_failures`] names each node and its cause. [`ErrorKind::InvalidInput`] for
    /// a bad name.
    ///
    /// # Cancel safety
    /// Cancel safe: node requests run in their own tasks and release what they were granted
    /// once they learn the round was abandoned.
    pub async fn try_acquire(&self) -> Result<Option<RedLockGuard>> {
        let name = &*self.name;
        keys::check_name(name)?;
        match self.round(name).await? {
            Round::Won(g) => Ok(Some(g)),
            Round::Contended(_) => Ok(None),
            Round::Failed(e) => Err(e),
        }
    }

    /// Runs rounds until one wins or `wait` has passed (zero: one round).
    ///
    /// `Ok(None)` when the wait elapsed with the lock held elsewhere.
    ///
    /// Rounds are separated by a random pause ([`RedLockBuilder::retry_delay`], 50–250 ms by
    /// default), so competing clients desynchronise; no round starts when its pause would end
    /// after the wait.
    ///
    /// # Errors
    /// As [`RedLock::try_acquire`], from the last round: when that round failed for node
    /// failures rather than contention, [`ErrorKind::QuorumNotReached`] names them.
    /// [`ErrorKind::InvalidInput`] for a `wait` over 365 days.
    ///
    /// # Cancel safety
    /// As [`RedLock::try_acquire`].
    ///
    /// # Examples
    /// ```no_run
    /// use distlock::{Lease, Release};
    /// # async fn f(redlock: distlock::RedLock) -> distlock::Result<()> {
    /// use std::time::Duration;
    /// match redlock.try_acquire_for(Duration::from_secs(2)).await? {
    ///     Some(guard) => {
    ///         // work until guard.valid_until(), then:
    ///         guard.release().await?;
    ///     }
    ///     None => println!("held elsewhere for 2 s"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_acquire_for(&self, wait: Duration) -> Result<Option<RedLockGuard>> {
        match self.rounds(&self.name, wait).await? {
            Round::Won(g) => Ok(Some(g)),
            Round::Contended(_) => Ok(None),
            Round::Failed(e) => Err(e),
        }
    }

    /// Runs rounds until one wins or the default wait has passed, as
    /// [`RedLock::try_acquire_for`].
    ///
    /// The default wait is [`RedLockBuilder::default_wait`], 60 s unless set.
    ///
    /// # Errors
    /// [`ErrorKind::NotAcquired`] when the wait elapsed with the lock held elsewhere
    /// ([`Error::node_failures`] names the nodes of the last round that did not grant);
    /// otherwise as [`RedLock::try_acquire_for`].
    ///
    /// # Cancel safety
    /// As [`RedLock::try_acquire`].
    pub async fn acquire(&self) -> Result<RedLockGuard> {
        let name = &*self.name;
        let wait = self.nodes.inner.default_wait;
        match self.rounds(name, wait).await? {
            Round::Won(g) => Ok(g),
            Round::Contended(e) => {
                Err(e.into_not_acquired(format!("RedLock {name:?} not acquired within {wait:?}")))
            }
            Round::Failed(e) => Err(e),
        }
    }

    /// Rounds with random pauses until one wins or `wait` has passed; the last round.
    async fn rounds(&self, name: &str, wait: Duration) -> Result<Round> {
        keys::check_name(name)?;
        keys::check_wait(wait)?;
        let deadline = Instant::now() + wait;
        loop {
            let round = self.round(name).await?;
            if matches!(round, Round::Won(_)) {
                return Ok(round);
            }
            let pause = self.pause();
            if Instant::now() + pause >= deadline {
                return Ok(round);
            }
            tokio::time::sleep(pause).await;
        }
    }

    /// Each node's view of the lock (holders, TTL, token), or why it could not be read.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] for a bad name; node failures are reported per node.
    ///
    /// # Cancel safety
    /// Cancel safe: read-only.
    pub async fn status(&self) -> Result<Vec<(String, Result<LockStatus>)>> {
        let name = &*self.name;
        keys::check_name(name)?;
        let timeout = self.nodes.inner.node_timeout.max(Duration::from_secs(1));
        let views =
            futures_util::future::join_all(self.nodes.inner.nodes.iter().map(|n| async move {
                let view = async {
                    let c = n.client(timeout).await?;
                    c.lock(name).status().await
                };
                let r = match tokio::time::timeout(timeout, view).await {
                    Ok(r) => r,
                    Err(_) => Err(Error::new(ErrorKind::Connection, "timed out")),
                };
                (n.redacted.clone(), r)
            }))
            .await;
        Ok(views)
    }

    fn pause(&self) -> Duration {
        let (lo, hi) = self.nodes.inner.retry_delay;
        if hi <= lo {
            return lo;
        }
        rand::random_range(lo..=hi)
    }

    /// The clock-drift allowance for a lease: lease × drift factor + 2 ms.
    fn drift(&self, lease: Duration) -> Duration {
        lease.mul_f64(self.nodes.inner.drift_factor) + Duration::from_millis(2)
    }

    async fn round(&self, name: &str) -> Result<Round> {
        let inner = &self.nodes.inner;
        let n = inner.nodes.len();
        let ttl_ms = inner.ttl.as_millis() as u64;
        let start = Instant::now();
        let deadline = start + inner.node_timeout;
        let owner_client = inner
            .nodes
            .iter()
            .find_map(|n| n.client.lock().unwrap().clone());
        let owner = match &owner_client {
            Some(c) => c.new_owner(),
            None => Owner::parse(&format!("{}:1", uuid::Uuid::new_v4())).expect("valid owner"),
        };
        let (decision_tx, decision_rx) = watch::channel(Decision::Pending);
        let (result_tx, mut result_rx) = mpsc::channel::<(usize, NodeResult)>(n);
        let mut tasks = Vec::with_capacity(n);
        for i in 0..n {
            let me = self.clone();
            let owner = owner.clone();
            let name = name.to_string();
            let result_tx = result_tx.clone();
            let mut decision_rx = decision_rx.clone();
            tasks.push(tokio::spawn(async move {
                let node = &me.nodes.inner.nodes[i];
                let outcome = async {
                    let c = node.client(me.nodes.inner.node_timeout).await?;
                    let lock = c.lock(name.as_str());
                    lock.core
                        .attempt(&owner, Mode::New, ttl_ms, &c.request_id(), 0)
                        .await
                }
                .await;
                let holds_maybe = !matches!(outcome, Ok(Attempt::Held { .. }));
                let _ = result_tx.send((i, NodeResult::from(outcome))).await;
                // Wait for the round's verdict, then give back what was not counted.
                let verdict = match decision_rx.wait_for(|d| *d != Decision::Pending).await {
                    Ok(d) => d.clone(),
                    Err(_) => Decision::Release,
                };
                let keep = matches!(&verdict, Decision::Keep(counted) if counted[i]);
                if holds_maybe && !keep {
                    let client = node.client.lock().unwrap().clone();
                    if let Some(c) = client {
                        let _ = c
                            .lock(name.as_str())
                            .core
                            .release_hold(&owner, me.nodes.inner.ttl)
                            .await;
                    }
                }
            }));
        }
        drop(result_tx);

        let mut counted = vec![false; n];
        let mut tokens = vec![None; n];
        let mut failures: Vec<Option<String>> = vec![None; n];
        let mut answered = vec![false; n];
        let mut held_elsewhere = 0;
        let mut failed = 0;
        let mut granted = 0;
        while answered.iter().filter(|a| **a).count() < n {
            if failed + held_elsewhere > n - inner.quorum {
                break; // a quorum has become impossible
            }
            tokio::select! {
                r = result_rx.recv() => {
                    let Some((i, r)) = r else { break };
                    answered[i] = true;
                    match r {
                        NodeResult::Granted(token) => {
                            counted[i] = true;
                            tokens[i] = Some(FencingToken(token));
                            granted += 1;
                        }
                        NodeResult::Held => {
                            held_elsewhere += 1;
                            failures[i] = Some("held by another owner".into());
                        }
                        NodeResult::Failed(cause) => {
                            failed += 1;
                            failures[i] = Some(cause);
                        }
                    }
                }
                _ = tokio::time::sleep_until(deadline) => break,
            }
        }
        let elapsed = start.elapsed();
        let validity = inner
            .ttl
            .checked_sub(elapsed)
            .and_then(|v| v.checked_sub(self.drift(inner.ttl)));
        for i in 0..n {
            if !answered[i] && failures[i].is_none() {
                failures[i] = Some(format!(
                    "no answer within the node timeout {:?}",
                    inner.node_timeout
                ));
            }
        }
        if granted >= inner.quorum {
            if let Some(validity) = validity.filter(|v| !v.is_zero()) {
                let _ = decision_tx.send(Decision::Keep(Arc::new(counted.clone())));
                return Ok(Round::Won(RedLockGuard {
                    redlock: self.clone(),
                    name: name.to_string(),
                    owner,
                    tokens,
                    valid_until: Arc::new(Mutex::new(start + validity)),
                    extensions: Arc::new(AtomicU32::new(0)),
                    released: false,
                    keep_alive: None,
                }));
            }
        }
        // Failed: every node releases what it may hold. Wait for that, at most one more node
        // timeout: a node still silent then releases whenever it answers.
        let _ = decision_tx.send(Decision::Release);
        let _ =
            tokio::time::timeout(inner.node_timeout, futures_util::future::join_all(tasks)).await;
        let nodes: Vec<NodeFailure> = failures
            .into_iter()
            .enumerate()
            .filter_map(|(i, f)| {
                f.map(|cause| NodeFailure {
                    node: inner.nodes[i].redacted.clone(),
                    cause,
                })
            })
            .collect();
        let why = if granted >= inner.quorum {
            format!(
                "{granted} of {n} nodes granted {name:?}, but after {elapsed:?} no validity was left of the {:?} TTL",
                inner.ttl
            )
        } else {
            format!(
                "{granted} of {n} nodes granted {name:?}; {} needed",
                inner.quorum
            )
        };
        let err = Error::quorum(why, nodes);
        // Contention alone rules out a quorum: whatever the failed or silent nodes would have
        // answered, too many nodes are held by other owners.
        if held_elsewhere > n - inner.quorum {
            Ok(Round::Contended(err))
        } else {
            Ok(Round::Failed(err))
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Decision {
    Pending,
    Keep(Arc<Vec<bool>>),
    Release,
}

enum NodeResult {
    Granted(u128),
    Held,
    Failed(String),
}

impl From<Result<Attempt>> for NodeResult {
    fn from(r: Result<Attempt>) -> Self {
        match r {
            Ok(Attempt::Granted { token, .. }) => NodeResult::Granted(token),
            Ok(Attempt::Held { .. }) => NodeResult::Held,
            // With its causes: the node's error text alone would not say why.
            Err(e) => NodeResult::Failed(format!("{e:#}")),
        }
    }
}

enum Round {
    Won(RedLockGuard),
    /// Only contention: other owners hold too many nodes.
    Contended(Error),
    /// Node failures or a used-up validity.
    Failed(Error),
}
