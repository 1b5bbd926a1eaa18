//! The one error type of distlock: [`Error`], classified by [`ErrorKind`].
//!
//! Contention is not an error: `try_*` methods return `Ok(None)` when another owner holds
//! the lock. An `Error` means the call could not do what it was asked (a wait elapsed, the
//! lock is not ours, the input was invalid, the server failed). The server's or driver's own
//! error, when there is one, is available through [`std::error::Error::source`].
//!
//! `Display` (`{}`) shows distlock's own message only, never the source, so that chained
//! output (anyhow's `{:#}`, or walking `source()`) shows each cause once, as the Rust API
//! guidelines ask. The alternate form `{:#}` appends the causes itself (`message: cause`),
//! for logging a `distlock::Error` on its own.
//!
//! No error message ever contains a password: URLs are shown redacted and driver errors are
//! wrapped, never formatted with the connection string.

use std::fmt;

mod from_redis;

pub(crate) use from_redis::server_reply;

/// What went wrong, for matching. New kinds may be added in minor releases.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The lock was not acquired before the wait elapsed.
    ///
    /// Returned by `acquire`; `try_acquire_for` returns `Ok(None)` instead.
    NotAcquired,
    /// The lock is not held by this owner.
    ///
    /// Returned to a release, extension or re-entry after the lease was lost, or by a non-owner.
    /// [`Error::not_held_reason`] tells whether the lock is gone or held by someone else.
    NotHeld,
    /// Bad input to a call: empty or oversized name, zero or overflowing duration, an owner
    /// string of the wrong shape.
    ///
    /// Nothing was sent to the server.
    InvalidInput,
    /// Bad client configuration: unparsable URL, unsupported scheme, conflicting options.
    Config,
    /// The server could not be reached or the connection broke, or a command timed out.
    Connection,
    /// The server refused our credentials (wrong password or ACL user).
    Auth,
    /// The key holds a value of another Redis type (`WRONGTYPE`), or another kind of
    /// primitive's data under the same name.
    ///
    /// For example, a plain or fair lock was asked for where a read-write lock's hash is, or
    /// the other way round. The message names what the key holds and what was asked for; the
    /// key was left as it was.
    WrongType,
    /// The server answered in a shape the script contract does not allow.
    UnexpectedReply,
    /// The server's ACL refused a command or channel this operation needs (`NOPERM`).
    ///
    /// The message names what is missing. Nothing was granted.
    NoPermission,
    /// The server is at its `maxmemory` limit with the `noeviction` policy and refused the
    /// write (`OOM`).
    ///
    /// Nothing was written.
    OutOfMemory,
    /// The client was shut down ([`Client::shutdown`](crate::Client::shutdown)) and makes no
    /// new grants.
    Closed,
    /// Any other server error (e.g. `READONLY`, `BUSY`).
    Backend,
    /// The call would deadlock and was refused.
    ///
    /// A read -> write upgrade of a [`RwLock`](crate::RwLock) by an owner holding only a read lock.
    WouldDeadlock,
    /// A [`RedLock`](crate::RedLock) could not get a quorum of nodes within the lock's validity.
    ///
    /// [`Error::node_failures`] names each failing node and its cause.
    QuorumNotReached,
    /// A write was made on the master but fewer replicas than asked for confirmed it.
    ///
    /// Replicas confirm through `WAIT`, within the timeout set by
    /// [`ClientBuilder::replica_acks`](crate::ClientBuilder::replica_acks).
    /// A grant was given back (waiting acquires retry until their deadline); a release,
    /// count-down or permit addition was resent until its resend window ended, and the error
    /// then also says its outcome is unknown ([`Error::is_outcome_unknown`]).
    /// [`Error::replication`] says how many acknowledged.
    NotReplicated,
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ErrorKind::NotAcquired => "lock not acquired",
            ErrorKind::NotHeld => "lock not held",
            ErrorKind::InvalidInput => "invalid input",
            ErrorKind::Config => "invalid configuration",
            ErrorKind::Connection => "connection failure",
            ErrorKind::Auth => "authentication failed",
            ErrorKind::WrongType => "wrong key type",
            ErrorKind::UnexpectedReply => "unexpected reply",
            ErrorKind::NoPermission => "permission denied by the server's ACL",
            ErrorKind::OutOfMemory => "server out of memory",
            ErrorKind::Closed => "client shut down",
            ErrorKind::Backend => "server error",
            ErrorKind::QuorumNotReached => "quorum not reached",
            ErrorKind::WouldDeadlock => "would deadlock",
            ErrorKind::NotReplicated => "not confirmed by enough replicas",
        })
    }
}

/// Why a lock is not held, where the server can tell.
///
/// distlock tells them apart as Redisson tells a released lock from one held by another
/// thread. New reasons may be added in minor releases.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NotHeldReason {
    /// The lock key does not exist: it was released, expired or deleted.
    Gone,
    /// Another owner holds the lock now.
    HeldByOther,
    /// A resent release found the lock gone or held by another owner.
    ///
    /// The release was resent because its first send got no answer. Either an earlier send released
    /// it, or the hold had already been lost (a server restarted without it, a failover to a
    /// replica that never had it). The final release of a plain lock leaves no record on the server
    /// that would tell which, so this owner cannot know whether it held the lock to the end; the
    /// lock is not held by it either way.
    Unconfirmed,
}

/// What the caller can change to fix an error, where distlock can tell ([`Error::fix`]).
///
/// An error's `Display` ends with the fix in the library's terms (a [`ClientBuilder`](crate::ClientBuilder)
/// method); a front end with its own terms (the `distlock` command's flags) takes the error
/// [`without_fix`](Error::without_fix) and says it its own way. New fixes may be added in
/// minor releases.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fix {
    /// The server requires a password and none was given: give it
    /// ([`ClientBuilder::password`](crate::ClientBuilder::password), or in the URL).
    GivePassword,
    /// The server refused the password or user name given: check them
    /// ([`ClientBuilder::password`](crate::ClientBuilder::password),
    /// [`ClientBuilder::username`](crate::ClientBuilder::username), or the URL's).
    CheckCredentials,
    /// A password was given to a server that has none: give none (or set one on the server).
    RemovePassword,
    /// The URL's password has a character that ends or changes the URL's parts (`# ? /`, or a
    /// `%` that starts an escape): percent-encode it, or give the password apart
    /// ([`ClientBuilder::password`](crate::ClientBuilder::password)).
    EncodePassword,
    /// The server's TLS certificate is signed by a CA that is not trusted: give that CA
    /// ([`ClientBuilder::tls_ca_cert`](crate::ClientBuilder::tls_ca_cert)), or skip the check
    /// (`#insecure`).
    TrustCa,
}

impl Fix {
    /// The fix in the library's terms, as `Display` shows it.
    fn library_text(self) -> &'static str {
        match self {
            Fix::GivePassword => {
                "give the password with ClientBuilder::password (or in the URL: \
                 redis://:PASSWORD@HOST)"
            }
            Fix::CheckCredentials => {
                "check the password and user name given (ClientBuilder::password, \
                 ClientBuilder::username, or the URL's)"
            }
            Fix::RemovePassword => {
                "give no password (neither ClientBuilder::password nor one in the URL), or set \
                 one on the server (requirepass)"
            }
            Fix::EncodePassword => {
                "percent-encode `@ : / ? # %` in the URL's password (%40 %3A %2F %3F %23 %25), \
                 or give the password apart with ClientBuilder::password"
            }
            Fix::TrustCa => {
                "give the CA that signed the server's certificate with \
                 ClientBuilder::tls_ca_cert (or $SSL_CERT_FILE), or skip the check with \
                 #insecure"
            }
        }
    }
}

/// One node's part in a failed multi-node operation ([`ErrorKind::QuorumNotReached`]).
///
/// Read from [`Error::node_failures`]; fields may be added in minor releases.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeFailure {
    /// The node's URL, password masked.
    pub node: String,
    /// What happened there: held by another owner, timed out, unreachable, …
    pub cause: String,
}

/// A distlock error: a [`ErrorKind`], a message, and the underlying cause if any.
///
/// `{}` shows distlock's message (with each failing node for
/// [`ErrorKind::QuorumNotReached`], and a note when the outcome is unknown), not the cause:
/// the cause is the [`source`](std::error::Error::source), so chained output (anyhow's
/// `{:#}`) shows it once. `{:#}` shows the message followed by its causes (`message: cause`).
pub struct Error {
    kind: ErrorKind,
    message: String,
    reason: Option<NotHeldReason>,
    nodes: Vec<NodeFailure>,
    unknown: bool,
    /// (acknowledged, wanted) replicas of [`ErrorKind::NotReplicated`].
    replication: Option<(u32, u32)>,
    /// What the caller can change, shown after the message.
    fix: Option<Fix>,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

/// `Result<T, distlock::Error>`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
            reason: None,
            nodes: Vec::new(),
            unknown: false,
            replication: None,
            fix: None,
            source: None,
        }
    }

    /// Returns what the caller can change to fix this error, where distlock can tell.
    ///
    /// `Display` ends with it in the library's terms; see [`Fix`].
    pub fn fix(&self) -> Option<Fix> {
        self.fix
    }

    /// Returns this error without its [`fix`](Error::fix): `Display` then shows the cause
    /// alone, for a front end that says the fix in its own terms (the `distlock` command
    /// names its flags).
    #[must_use]
    pub fn without_fix(mut self) -> Self {
        self.fix = None;
        self
    }

    /// This error with `fix`, shown after its message.
    pub(crate) fn with_fix(mut self, fix: Fix) -> Self {
        self.fix = Some(fix);
        self
    }

    pub(crate) fn not_replicated(context: &str, acked: u32, wanted: u32) -> Self {
        let mut e = Error::new(
            ErrorKind::NotReplicated,
            format!(
                "{context}: applied on the master, but {acked} of {wanted} replicas confirmed \
                 it within the WAIT timeout (a grant is given back; a release is resent until \
                 confirmed)"
            ),
        );
        e.replication = Some((acked, wanted));
        e
    }

    /// For [`ErrorKind::NotReplicated`]: `(acknowledged, wanted)` replicas.
    pub fn replication(&self) -> Option<(u32, u32)> {
        self.replication
    }

    pub(crate) fn quorum(message: impl Into<String>, nodes: Vec<NodeFailure>) -> Self {
        let mut e = Error::new(ErrorKind::QuorumNotReached, message);
        e.nodes = nodes;
        e
    }

    /// Returns each node that did not grant in the last round, and why.
    ///
    /// Filled for [`ErrorKind::QuorumNotReached`], and for [`ErrorKind::NotAcquired`] from
    /// [`RedLock::acquire`](crate::RedLock::acquire); empty for other errors.
    pub fn node_failures(&self) -> &[NodeFailure] {
        &self.nodes
    }

    /// This error as [`ErrorKind::NotAcquired`], `message` put before its own (a RedLock's
    /// last contended round when the wait elapsed).
    pub(crate) fn into_not_acquired(mut self, message: impl Into<String>) -> Self {
        self.kind = ErrorKind::NotAcquired;
        self.message = format!("{}: {}", message.into(), self.message);
        self
    }

    /// This error with `hint` after its message (`<message>: <hint>`).
    pub(crate) fn with_hint(mut self, hint: &str) -> Self {
        self.message = format!("{}: {hint}", self.message);
        self
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::InvalidInput, message)
    }

    pub(crate) fn config(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Config, message)
    }

    pub(crate) fn unexpected(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::UnexpectedReply, message)
    }

    pub(crate) fn not_held(name: &str, reason: NotHeldReason) -> Self {
        let what = match reason {
            NotHeldReason::Gone => "it was released, expired or deleted",
            NotHeldReason::HeldByOther => "another owner holds it",
            NotHeldReason::Unconfirmed => {
                "a resent release found it gone or re-taken: an earlier send released it, or \
                 the hold was lost before (a restart, a failover); the server cannot tell which"
            }
        };
        let mut e = Error::new(
            ErrorKind::NotHeld,
            format!("lock {name:?} is not held by this owner: {what}"),
        );
        e.reason = Some(reason);
        e
    }

    pub(crate) fn with_source(
        mut self,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        self.source = Some(Box::new(source));
        self
    }

    /// Returns whether the request may or may not have been applied.
    ///
    /// The server answered none of its sends within the resend window (a stalled or paused server
    /// can still run a send queued there). Every such request is applied at most once. A grant
    /// whose outcome is unknown (a re-entry, a semaphore acquire) is cancelled in the background:
    /// if it ran, it is given back when the server answers. A release or count-down stays as the
    /// server has it: applied once if any send reached the server.
    pub fn is_outcome_unknown(&self) -> bool {
        self.unknown
    }

    pub(crate) fn outcome_unknown(mut self) -> Self {
        self.unknown = true;
        self
    }

    /// What went wrong.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// For [`ErrorKind::NotHeld`]: whether the lock is gone or held by another owner.
    pub fn not_held_reason(&self) -> Option<NotHeldReason> {
        self.reason
    }
}

/// An operation on a named lock, for error messages (names longer than 80 bytes are cut).
pub(crate) struct Ctx<'a> {
    pub(crate) op: &'static str,
    pub(crate) name: &'a str,
}

impl fmt::Display for Ctx<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.name;
        if name.len() > 80 {
            let prefix = prefix_at_most(name, 80);
            write!(f, "{} {:?}…", self.op, prefix)
        } else {
            write!(f, "{} {name:?}", self.op)
        }
    }
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
pub(crate) fn prefix_at_most(s: &str, max: usize) -> &str {
    let end = (0..=max.min(s.len()))
        .rev()
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(0);
    &s[..end]
}

impl fmt::Display for Error {
    /// distlock's own message; the cause is left to [`source`](std::error::Error::source).
    /// The alternate form (`{:#}`) appends each cause of the chain, `: cause`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if let Some(fix) = self.fix {
            write!(f, ": {}", fix.library_text())?;
        }
        if self.unknown {
            f.write_str(" (no answer within the resend window: outcome unknown)")?;
        }
        for n in &self.nodes {
            write!(f, "; {}: {}", n.node, n.cause)?;
        }
        if f.alternate() {
            let mut cause = std::error::Error::source(self);
            while let Some(c) = cause {
                write!(f, ": {c}")?;
                cause = c.source();
            }
        }
        Ok(())
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Error");
        d.field("kind", &self.kind).field("message", &self.message);
        if let Some(r) = self.reason {
            d.field("reason", &r);
        }
        if !self.nodes.is_empty() {
            d.field("nodes", &self.nodes);
        }
        if let Some(fix) = self.fix {
            d.field("fix", &fix);
        }
        if let Some(s) = &self.source {
            d.field("source", &s.to_string());
        }
        d.finish()
    }
}

impl std::error::Error for Error {
    /// The server's or driver's error. A wrapper that shows exactly its own source's text
    /// (redis-rs's `RedisError` around an I/O or server error) is skipped for that source, so
    /// that walking the chain shows each cause once.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        let mut s: &(dyn std::error::Error + 'static) = self.source.as_deref()?;
        while let Some(inner) = s.source() {
            if s.to_string() != inner.to_string() {
                break;
            }
            s = inner;
        }
        Some(s)
    }
}

#[cfg(test)]
mod tests;
