//! [`RedLockBuilder`]: the nodes and settings of a [`RedLock`].

use super::*;

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

impl fmt::Debug for RedLockBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Node URLs may carry passwords: only their redacted forms.
        f.debug_struct("RedLockBuilder")
            .field(
                "nodes",
                &self
                    .nodes
                    .iter()
                    .map(|n| n.redacted.as_str())
                    .collect::<Vec<_>>(),
            )
            .field("ttl", &self.ttl)
            .field("node_timeout", &self.node_timeout)
            .field("default_wait", &self.default_wait)
            .field("quorum", &self.quorum)
            .finish()
    }
}

impl RedLockBuilder {
    pub(super) fn new(nodes: Vec<Node>) -> Self {
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

    /// Sets how long [`RedLock::acquire`] keeps trying.
    ///
    /// Default 60 s, as [`ClientBuilder::default_wait`](crate::ClientBuilder::default_wait).
    pub fn default_wait(mut self, wait: Duration) -> Self {
        self.default_wait = wait;
        self
    }

    /// Sets the bounds of the random pause between rounds of [`RedLock::acquire`] and
    /// [`RedLock::try_acquire_for`].
    ///
    /// Default 50–250 ms. The pause desynchronises competing clients (redis.io's random retry
    /// delay).
    pub fn retry_delay(mut self, min_pause: Duration, max_pause: Duration) -> Self {
        self.retry_delay = (min_pause, max_pause);
        self
    }

    /// Grants needed (default N/2 + 1). Must be more than half of the nodes.
    pub fn quorum(mut self, quorum: usize) -> Self {
        self.quorum = Some(quorum);
        self
    }

    /// Bound the number of [`RedLockGuard::extend`](crate::Lease::extend) calls (default: unbounded).
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
    pub async fn build(self) -> Result<RedLockNodes> {
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
        let redlock = RedLockNodes {
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
