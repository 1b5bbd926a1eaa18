//! [`RedLock`]: the Redlock algorithm of redis.io's "Distributed Locks with Redis" over N
//! independent Redis masters.
//!
//! # The algorithm, as implemented
//! 1. Take a monotonic start time; mint a fresh owner.
//! 2. Send the acquire to all N nodes in parallel, each bounded by the node timeout (≪ TTL).
//!    Each node runs the same script as [`Lock`](crate::Lock) (Redisson hash layout, one hold,
//!    PEXPIRE = TTL).
//! 3. Succeed iff at least a quorum (N/2 + 1 unless set) granted and the validity
//!    `TTL − elapsed − drift` is positive, drift = TTL × drift factor (0.01) + 2 ms.
//!    Stop waiting as soon as a quorum has become impossible.
//! 4. On failure release on **all** nodes, including those that did not answer: every node's
//!    request runs in its own task, which, once its node answers (however late), releases a
//!    grant that was not counted. A node that never answers keeps its grant until the TTL.
//! 5. Retry after a random delay (so competing clients desynchronise), until the caller's
//!    wait has passed: [`RedLock::try_acquire`] makes one round, [`RedLock::try_acquire_for`]
//!    rounds within a wait, [`RedLock::acquire`] within the default wait (60 s).
//!
//! Extensions ([`RedLockGuard::extend`]) count only if a quorum extends within the validity;
//! their number can be bounded.
//!
//! # When to prefer one master with replicas
//! Redisson deprecated its RedLock: for most services a single master (with Sentinel or
//! Cluster failover), replica acknowledgement of writes, and the [fencing
//! tokens](crate::FencingToken) of [`Lock`](crate::Lock) give the same or better safety with one
//! round trip instead of N. Martin Kleppmann's argument: Redlock's safety rests on timing
//! assumptions — bounded network delay, bounded process pauses, bounded clock drift — that real
//! systems break (a GC pause or a jumped clock lets two clients believe they hold the lock), and
//! since Redlock issues no monotonic token, the protected resource cannot tell the stale holder
//! from the new one; a lock that needs correctness needs fencing, and with fencing a single
//! master suffices. antirez's reply: Redlock checks elapsed time after acquiring, so pauses
//! before that are caught; pauses after it hurt every lease-based lock alike; and it needs only
//! that clocks advance at roughly the same rate (monotonic clocks, no large jumps), not that they
//! agree. Use RedLock when the nodes must be independent (no replication) and you accept its
//! timing assumptions; use `Lock` with fencing tokens when the resource can check them.
//!
//! # Operating the nodes
//! A node that restarts without the keys it granted lets a second client get a quorum while the
//! first still believes it holds the lock. Run every node with `appendonly yes` and
//! `appendfsync always`, or delay every restart by more than the longest TTL in use.

use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::Rng;
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

/// A Redlock over independent masters; see the [module docs](self). Cheap to clone.
///
/// # Examples
/// ```no_run
/// # async fn f() -> distlock::Result<()> {
/// use std::time::Duration;
/// let redlock = distlock::RedLock::builder_from_urls([
///     "redis://10.0.0.1/", "redis://10.0.0.2/", "redis://10.0.0.3/",
/// ])
/// .ttl(Duration::from_secs(10))
/// .build()
/// .await?;
/// if let Some(guard) = redlock.try_acquire("payments").await? {
///     // work within guard.valid_until()
///     guard.release().await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedLock {
    inner: Arc<Inner>,
}

impl fmt::Debug for RedLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedLock")
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

/// Settings of a [`RedLock`]. Durations are [`std::time::Duration`]s.
pub struct RedLockBuilder {
    nodes: Vec<Node>,
    ttl: Duration,
    drift_factor: f64,
    node_timeout: Option<Duration>,
    default_wait: Duration,
    retry_delay: (Duration, Duration),
    quorum: Option<usize>,
    max_extensions: Option<u32>,
}

impl RedLock {
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

    /// A builder over server URLs. [`RedLockBuilder::build`] connects to them; a node that
    /// cannot be reached then is tried again at every acquire (and counts as failed until it
    /// answers).
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

    /// One round: `Ok(None)` when other owners hold the lock on too many nodes for a quorum
    /// (contention is not an error).
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
    pub async fn try_acquire(&self, name: &str) -> Result<Option<RedLockGuard>> {
        keys::check_name(name)?;
        match self.round(name).await? {
            Round::Won(g) => Ok(Some(g)),
            Round::Contended(_) => Ok(None),
            Round::Failed(e) => Err(e),
        }
    }

    /// Rounds until one wins or `wait` has passed (zero: one round): `Ok(None)` when the wait
    /// elapsed with the lock held elsewhere.
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
    /// # async fn f(redlock: distlock::RedLock) -> distlock::Result<()> {
    /// use std::time::Duration;
    /// match redlock.try_acquire_for("payments", Duration::from_secs(2)).await? {
    ///     Some(guard) => {
    ///         // work until guard.valid_until(), then:
    ///         guard.release().await?;
    ///     }
    ///     None => println!("held elsewhere for 2 s"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_acquire_for(
        &self,
        name: &str,
        wait: Duration,
    ) -> Result<Option<RedLockGuard>> {
        match self.rounds(name, wait).await? {
            Round::Won(g) => Ok(Some(g)),
            Round::Contended(_) => Ok(None),
            Round::Failed(e) => Err(e),
        }
    }

    /// Rounds until one wins or the default wait ([`RedLockBuilder::default_wait`], 60 s
    /// unless set) has passed, as [`RedLock::try_acquire_for`].
    ///
    /// # Errors
    /// [`ErrorKind::NotAcquired`] when the wait elapsed with the lock held elsewhere
    /// ([`Error::node_failures`] names the nodes of the last round that did not grant);
    /// otherwise as [`RedLock::try_acquire_for`].
    ///
    /// # Cancel safety
    /// As [`RedLock::try_acquire`].
    pub async fn acquire(&self, name: &str) -> Result<RedLockGuard> {
        let wait = self.inner.default_wait;
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
    pub async fn status(&self, name: &str) -> Result<Vec<(String, Result<LockStatus>)>> {
        keys::check_name(name)?;
        let timeout = self.inner.node_timeout.max(Duration::from_secs(1));
        let views = futures_util::future::join_all(self.inner.nodes.iter().map(|n| async move {
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
        let (lo, hi) = self.inner.retry_delay;
        if hi <= lo {
            return lo;
        }
        rand::rng().random_range(lo..=hi)
    }

    /// The clock-drift allowance for a lease: lease × drift factor + 2 ms.
    fn drift(&self, lease: Duration) -> Duration {
        lease.mul_f64(self.inner.drift_factor) + Duration::from_millis(2)
    }

    async fn round(&self, name: &str) -> Result<Round> {
        let inner = &self.inner;
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
                let node = &me.inner.nodes[i];
                let outcome = async {
                    let c = node.client(me.inner.node_timeout).await?;
                    let lock = c.lock(name.as_str());
                    lock.attempt(&owner, Mode::New, ttl_ms, &c.request_id(), false)
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
                            .release_hold(&owner, me.inner.ttl)
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
                    extensions: AtomicU32::new(0),
                    released: false,
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
    Granted(u64),
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

impl RedLockBuilder {
    fn new(nodes: Vec<Node>) -> Self {
        RedLockBuilder {
            nodes,
            ttl: Duration::from_secs(30),
            drift_factor: 0.01,
            node_timeout: None,
            default_wait: crate::DEFAULT_WAIT,
            retry_delay: (Duration::from_millis(50), Duration::from_millis(250)),
            quorum: None,
            max_extensions: None,
        }
    }

    /// TTL set on every node (default 30 s).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// Clock drift factor: drift = TTL × factor + 2 ms (default 0.01, as redis.io and
    /// go-redsync).
    pub fn drift_factor(mut self, factor: f64) -> Self {
        self.drift_factor = factor;
        self
    }

    /// How long to wait for one node's answer (default TTL / 100, between 10 ms and 500 ms).
    pub fn node_timeout(mut self, timeout: Duration) -> Self {
        self.node_timeout = Some(timeout);
        self
    }

    /// How long [`RedLock::acquire`] keeps trying (default 60 s, as
    /// [`ClientBuilder::default_wait`](crate::ClientBuilder::default_wait)).
    pub fn default_wait(mut self, wait: Duration) -> Self {
        self.default_wait = wait;
        self
    }

    /// The bounds of the random pause between rounds of [`RedLock::acquire`] and
    /// [`RedLock::try_acquire_for`] (default 50–250 ms), so that competing clients
    /// desynchronise (redis.io's random retry delay).
    pub fn retry_delay(mut self, min_pause: Duration, max_pause: Duration) -> Self {
        self.retry_delay = (min_pause, max_pause);
        self
    }

    /// Grants needed (default N/2 + 1). Must be more than half of the nodes.
    pub fn quorum(mut self, quorum: usize) -> Self {
        self.quorum = Some(quorum);
        self
    }

    /// Bound the number of [`RedLockGuard::extend`] calls (default: unbounded).
    pub fn max_extensions(mut self, n: u32) -> Self {
        self.max_extensions = Some(n);
        self
    }

    /// Check the settings and connect to URL nodes.
    ///
    /// # Errors
    /// [`ErrorKind::Config`]: no nodes, a quorum of half the nodes or less (two owners could
    /// both win) or more than the nodes, a TTL out of range, a node timeout not below the TTL,
    /// a drift factor outside [0, 1), a default wait over 365 days. Unreachable URL nodes are
    /// not an error here (they count as failed until they answer) unless none answers.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn build(self) -> Result<RedLock> {
        let n = self.nodes.len();
        if n == 0 {
            return Err(Error::config("a RedLock needs at least one node"));
        }
        let quorum = self.quorum.unwrap_or(n / 2 + 1);
        if quorum <= n / 2 || quorum > n {
            return Err(Error::config(format!(
                "quorum {quorum} of {n} nodes must be more than half and at most all"
            )));
        }
        keys::lease_ms("RedLock TTL", self.ttl).map_err(|e| Error::config(e.to_string()))?;
        if !(0.0..1.0).contains(&self.drift_factor) {
            return Err(Error::config("drift factor must be in [0, 1)"));
        }
        keys::check_wait(self.default_wait).map_err(|e| Error::config(e.to_string()))?;
        let node_timeout = self.node_timeout.unwrap_or_else(|| {
            (self.ttl / 100).clamp(Duration::from_millis(10), Duration::from_millis(500))
        });
        if node_timeout.is_zero() || node_timeout >= self.ttl {
            return Err(Error::config(
                "node timeout must be above zero and below the TTL",
            ));
        }
        let redlock = RedLock {
            inner: Arc::new(Inner {
                nodes: self.nodes,
                ttl: self.ttl,
                drift_factor: self.drift_factor,
                node_timeout,
                default_wait: self.default_wait,
                retry_delay: self.retry_delay,
                quorum,
                max_extensions: self.max_extensions,
            }),
        };
        let connect_timeout = node_timeout.max(Duration::from_secs(2));
        let results = futures_util::future::join_all(
            redlock
                .inner
                .nodes
                .iter()
                .map(|node| node.client(connect_timeout)),
        )
        .await;
        let mut reachable = 0;
        for (node, r) in redlock.inner.nodes.iter().zip(&results) {
            match r {
                Ok(_) => reachable += 1,
                Err(e) if e.kind() == ErrorKind::Config || e.kind() == ErrorKind::Auth => {
                    return Err(Error::config(format!("node {}: {e:#}", node.redacted)));
                }
                Err(e) => {
                    tracing::warn!(node = %node.redacted, error = format_args!("{e:#}"), "RedLock node unreachable")
                }
            }
        }
        if reachable == 0 {
            return Err(Error::new(
                ErrorKind::Connection,
                "no RedLock node is reachable",
            ));
        }
        Ok(redlock)
    }
}

/// A held RedLock. Dropping it releases on every node in the background.
#[must_use = "dropping the guard releases the lock at once"]
pub struct RedLockGuard {
    redlock: RedLock,
    name: String,
    owner: Owner,
    tokens: Vec<Option<FencingToken>>,
    valid_until: Arc<Mutex<Instant>>,
    extensions: AtomicU32,
    released: bool,
}

impl fmt::Debug for RedLockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedLockGuard")
            .field("name", &self.name)
            .field("owner", &self.owner)
            .field("tokens", &self.tokens)
            .finish()
    }
}

impl RedLockGuard {
    /// The owner field written on the nodes.
    pub fn owner(&self) -> &Owner {
        &self.owner
    }

    /// Per node (in the order given to the builder): the fencing token it issued, or `None`
    /// where it did not grant. Tokens of different nodes come from different counters and are
    /// not comparable with each other.
    pub fn node_tokens(&self) -> &[Option<FencingToken>] {
        &self.tokens
    }

    /// Nodes that granted this lock.
    pub fn granted_nodes(&self) -> usize {
        self.tokens.iter().filter(|t| t.is_some()).count()
    }

    /// End of the validity by the local monotonic clock: start + TTL − elapsed − drift, or,
    /// after an [extension](RedLockGuard::extend), its start + lease − elapsed − drift.
    pub fn valid_until(&self) -> std::time::Instant {
        self.valid_until.lock().unwrap().into_std()
    }

    /// Resolves when the validity ends (unless extended first).
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    pub async fn lost(&self) {
        loop {
            let until = *self.valid_until.lock().unwrap();
            if Instant::now() >= until {
                return;
            }
            tokio::time::sleep_until(until).await;
        }
    }

    /// Set the lock's TTL to `lease` from now on every node (shorter or longer than what was
    /// left), if it is still ours.
    ///
    /// The extension counts only if a quorum of nodes extends within the current validity;
    /// the new validity is measured from the start of this call, as an acquire's is:
    /// `lease` − elapsed − drift, drift = `lease` × drift factor (0.01) + 2 ms. Nodes that
    /// did not extend keep their old TTL.
    ///
    /// # Errors
    /// [`ErrorKind::NotHeld`] when the validity already ended or fewer than a quorum of
    /// nodes still had our hold (then [`lost`](RedLockGuard::lost) fires at the old
    /// validity's end); [`ErrorKind::InvalidInput`] for a zero or overflowing `lease`, a
    /// `lease` not above the node timeout (it would leave no validity), or when the
    /// configured number of extensions is used up. Nothing is sent to the nodes then.
    ///
    /// # Cancel safety
    /// Cancel safe: PEXPIRE is idempotent; a dropped extension leaves the validity as it was.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn f(redlock: distlock::RedLock) -> distlock::Result<()> {
    /// use std::time::Duration;
    /// let guard = redlock.acquire("payments").await?;
    /// // more work than one TTL: extend before the validity ends
    /// guard.extend(Duration::from_secs(30)).await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn extend(&self, lease: Duration) -> Result<()> {
        let inner = &self.redlock.inner;
        let lease_ms = keys::lease_ms("extension", lease)?;
        if lease <= inner.node_timeout {
            return Err(Error::invalid(format!(
                "RedLock {:?}: an extension of {lease:?} is not above the node timeout {:?}",
                self.name, inner.node_timeout
            )));
        }
        if let Some(max) = inner.max_extensions {
            if self.extensions.load(Ordering::Relaxed) >= max {
                return Err(Error::invalid(format!(
                    "RedLock {:?}: the limit of {max} extensions is reached",
                    self.name
                )));
            }
        }
        let start = Instant::now();
        if start >= *self.valid_until.lock().unwrap() {
            return Err(Error::not_held(&self.name, NotHeldReason::Gone));
        }
        let results = futures_util::future::join_all(inner.nodes.iter().map(|node| async {
            let c = node.client.lock().unwrap().clone()?;
            let lock = c.lock(self.name.as_str());
            match tokio::time::timeout(inner.node_timeout, lock.renew_one(&self.owner, lease_ms))
                .await
            {
                Ok(Ok(1)) => Some(()),
                _ => None,
            }
        }))
        .await;
        let extended = results.iter().filter(|r| r.is_some()).count();
        let elapsed = start.elapsed();
        let validity = lease
            .checked_sub(elapsed)
            .and_then(|v| v.checked_sub(self.redlock.drift(lease)));
        match validity {
            Some(v) if extended >= inner.quorum && !v.is_zero() => {
                self.extensions.fetch_add(1, Ordering::Relaxed);
                *self.valid_until.lock().unwrap() = start + v;
                Ok(())
            }
            _ => Err(Error::not_held(&self.name, NotHeldReason::Gone)),
        }
    }

    /// Release on every node, in parallel, each bounded by the node timeout (at least
    /// 100 ms). Only this owner's hold is removed: a node where another owner holds the lock
    /// is left alone.
    ///
    /// # Errors
    /// [`ErrorKind::NotHeld`] when fewer than a quorum of nodes still had our hold (the
    /// validity had ended); every node is released all the same.
    ///
    /// # Cancel safety
    /// A dropped release may or may not have reached each node; the TTL ends the rest.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn f(redlock: distlock::RedLock) -> distlock::Result<()> {
    /// if let Some(guard) = redlock.try_acquire("payments").await? {
    ///     // the work
    ///     if let Err(e) = guard.release().await {
    ///         eprintln!("the lock had expired before the release: {e}");
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn release(mut self) -> Result<()> {
        self.released = true;
        let released = release_everywhere(&self.redlock, &self.name, &self.owner).await;
        if released >= self.redlock.inner.quorum {
            Ok(())
        } else {
            Err(Error::not_held(&self.name, NotHeldReason::Gone))
        }
    }
}

async fn release_everywhere(redlock: &RedLock, name: &str, owner: &Owner) -> usize {
    let inner = &redlock.inner;
    let results = futures_util::future::join_all(inner.nodes.iter().map(|node| async {
        let c = node.client.lock().unwrap().clone()?;
        let lock = c.lock(name);
        match tokio::time::timeout(
            inner.node_timeout.max(Duration::from_millis(100)),
            lock.release_hold(owner, inner.ttl),
        )
        .await
        {
            Ok(Ok(())) => Some(()),
            _ => None,
        }
    }))
    .await;
    results.iter().filter(|r| r.is_some()).count()
}

impl Drop for RedLockGuard {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        let (redlock, name, owner) = (self.redlock.clone(), self.name.clone(), self.owner.clone());
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                release_everywhere(&redlock, &name, &owner).await;
            });
        }
    }
}
