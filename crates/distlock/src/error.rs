//! The one error type of distlock: [`Error`], classified by [`ErrorKind`].
//!
//! Contention is not an error: `try_*` methods return `Ok(None)` when another owner holds
//! the lock. An `Error` means the call could not do what it was asked (a wait elapsed, the
//! lock is not ours, the input was invalid, the server failed). The server's or driver's own
//! error, when there is one, is available through [`std::error::Error::source`].
//!
//! No error message ever contains a password: URLs are shown redacted and driver errors are
//! wrapped, never formatted with the connection string.

use std::fmt;

/// What went wrong, for matching. New kinds may be added in minor releases.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The lock was not acquired before the wait elapsed (`acquire`, `try_acquire_for`).
    NotAcquired,
    /// The lock is not held by this owner (release, extend or re-enter after the lease was
    /// lost, or by a non-owner). [`Error::not_held_reason`] tells whether the lock is gone
    /// or held by someone else.
    NotHeld,
    /// Bad input to a call: empty or oversized name, zero or overflowing duration, an owner
    /// string of the wrong shape. Nothing was sent to the server.
    InvalidInput,
    /// Bad client configuration: unparsable URL, unsupported scheme, conflicting options.
    Config,
    /// The server could not be reached or the connection broke, or a command timed out.
    Connection,
    /// The server refused our credentials (wrong password or ACL user).
    Auth,
    /// The key of this lock holds a value of another Redis type (`WRONGTYPE`); the key was
    /// left as it was.
    WrongType,
    /// The server answered in a shape the script contract does not allow.
    UnexpectedReply,
    /// The server's ACL refused a command or channel this operation needs (`NOPERM`); the
    /// message names what is missing. Nothing was granted.
    NoPermission,
    /// The server is at its `maxmemory` limit with the `noeviction` policy and refused the
    /// write (`OOM`); nothing was written.
    OutOfMemory,
    /// Any other server error (e.g. `READONLY`, `BUSY`).
    Backend,
    /// The call would deadlock and was refused: a read -> write upgrade of a
    /// [`RwLock`](crate::RwLock) by an owner holding only a read lock.
    WouldDeadlock,
    /// A [`RedLock`](crate::RedLock) could not get a quorum of nodes within the lock's
    /// validity; [`Error::node_failures`] names each failing node and its cause.
    QuorumNotReached,
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
            ErrorKind::Backend => "server error",
            ErrorKind::QuorumNotReached => "quorum not reached",
            ErrorKind::WouldDeadlock => "would deadlock",
        })
    }
}

/// Why a lock is not held, where the server can tell (as Redisson distinguishes a released
/// lock from one held by another thread).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NotHeldReason {
    /// The lock key does not exist: it was released, expired or deleted.
    Gone,
    /// Another owner holds the lock now.
    HeldByOther,
}

/// One node's part in a failed multi-node operation ([`ErrorKind::QuorumNotReached`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeFailure {
    /// The node's URL, password masked.
    pub node: String,
    /// What happened there: held by another owner, timed out, unreachable, …
    pub cause: String,
}

/// A distlock error: a [`ErrorKind`], a message, and the underlying cause if any.
pub struct Error {
    kind: ErrorKind,
    message: String,
    reason: Option<NotHeldReason>,
    nodes: Vec<NodeFailure>,
    unknown: bool,
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
            source: None,
        }
    }

    pub(crate) fn quorum(message: impl Into<String>, nodes: Vec<NodeFailure>) -> Self {
        let mut e = Error::new(ErrorKind::QuorumNotReached, message);
        e.nodes = nodes;
        e
    }

    /// For [`ErrorKind::QuorumNotReached`]: each node that did not grant, and why.
    pub fn node_failures(&self) -> &[NodeFailure] {
        &self.nodes
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

    /// Whether the request may or may not have been applied: the server answered none of
    /// its sends within the resend window (a stalled or paused server can still run a send
    /// queued there). Every such request is applied at most once. A grant whose outcome is
    /// unknown (a re-entry, a semaphore acquire) is cancelled in the background: if it ran,
    /// it is given back when the server answers. A release or count-down stays as the
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

    /// Classify a driver error (`context` names the operation, e.g. `acquire "orders"`).
    pub(crate) fn from_redis(context: &str, err: redis::RedisError) -> Self {
        use redis::{ErrorKind as K, ServerErrorKind as S};
        let code = err.code().unwrap_or("");
        let kind = if code == "WRONGTYPE" || err.to_string().contains("WRONGTYPE") {
            ErrorKind::WrongType
        } else if code == "NOAUTH" || code == "WRONGPASS" {
            ErrorKind::Auth
        } else if code == "NOPERM"
            || err.to_string().contains("NOPERM")
            // Redis < 7.2 words an ACL refusal inside a script this way.
            || err.to_string().contains("The user executing the script can't")
        {
            ErrorKind::NoPermission
        } else if code == "OOM" || err.to_string().contains("OOM command not allowed") {
            ErrorKind::OutOfMemory
        } else {
            match err.kind() {
                K::AuthenticationFailed => ErrorKind::Auth,
                K::Io => ErrorKind::Connection,
                K::InvalidClientConfig => ErrorKind::Config,
                K::UnexpectedReturnType | K::Parse => ErrorKind::UnexpectedReply,
                // Not serving for now: loading its snapshot, a replica that lost its master,
                // a cluster slot in transit. Retried like a broken connection.
                K::Server(S::BusyLoading)
                | K::Server(S::TryAgain)
                | K::Server(S::MasterDown)
                | K::Server(S::ClusterDown) => ErrorKind::Connection,
                _ if err.is_timeout()
                    || err.is_connection_dropped()
                    || err.is_connection_refusal()
                    || err.is_io_error() =>
                {
                    ErrorKind::Connection
                }
                _ => ErrorKind::Backend,
            }
        };
        let message = match kind {
            ErrorKind::WrongType => format!("{context}: the key holds a value of another type"),
            ErrorKind::Auth => format!("{context}: the server refused the credentials"),
            ErrorKind::Connection => format!("{context}: cannot reach the server"),
            ErrorKind::NoPermission => format!(
                "{context}: the server's ACL denies a command or channel this needs \
                 (see the minimal ACL in distlock's README)"
            ),
            ErrorKind::OutOfMemory => format!(
                "{context}: the server is out of memory (maxmemory reached, noeviction); \
                 nothing was written"
            ),
            _ => format!("{context}: {kind}"),
        };
        Error::new(kind, message).with_source(err)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if self.unknown {
            f.write_str(" (no answer within the resend window: outcome unknown)")?;
        }
        for n in &self.nodes {
            write!(f, "; {}: {}", n.node, n.cause)?;
        }
        if let Some(src) = &self.source {
            write!(f, " ({src})")?;
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
        if let Some(s) = &self.source {
            d.field("source", &s.to_string());
        }
        d.finish()
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|s| s as &(dyn std::error::Error + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_held_carries_reason() {
        let e = Error::not_held("orders", NotHeldReason::HeldByOther);
        assert_eq!(e.kind(), ErrorKind::NotHeld);
        assert_eq!(e.not_held_reason(), Some(NotHeldReason::HeldByOther));
        assert!(e.to_string().contains("another owner"));
    }

    #[test]
    fn wrongtype_is_classified() {
        let err = redis::RedisError::from((
            redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError),
            "WRONGTYPE Operation against a key holding the wrong kind of value",
        ));
        assert_eq!(Error::from_redis("x", err).kind(), ErrorKind::WrongType);
    }
}
