//! Whether a failed send is sent again, and after how long: pure functions of the error and
//! the request's resend rule, so that the rule is read (and tested) in one place, as redis-rs
//! keeps its cluster retry decision. [`super::backend::Backend`] acts on them.

use std::time::Duration;

use crate::error::{Error, ErrorKind};

/// The pauses before the first resends of a request that failed; every later one waits a
/// second.
pub(super) const RESEND_DELAYS: [Duration; 3] = [
    Duration::from_millis(10),
    Duration::from_millis(100),
    Duration::from_millis(400),
];

/// What a failed send says about the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// Its answer never came (a broken connection, a timeout): it may have run.
    Unanswered,
    /// Refused before anything ran: a refused connection, a server still loading its
    /// snapshot (`LOADING`), `TRYAGAIN`, `MASTERDOWN`, `CLUSTERDOWN`, a replica's `READONLY`
    /// (a master demoted by a failover), a Cluster's `MOVED` or `ASK` (on `MOVED` the cluster
    /// client rebuilds its slot map, so a resend goes to the slot's new master; an `ASK` that
    /// could not be followed is resent like a `MOVED`).
    Refused,
    /// The server's answer (a script's error, `WRONGTYPE`, `NOPERM`, …) or the client's own
    /// (a reply of the wrong shape): sending it again would get the same.
    Final,
}

/// What [`Failure`] a driver error is.
pub(crate) fn classify(e: &redis::RedisError) -> Failure {
    use redis::{ErrorKind as K, ServerErrorKind as S};
    if e.is_connection_refusal() {
        Failure::Refused
    } else if e.is_io_error() || e.is_connection_dropped() || e.is_timeout() {
        Failure::Unanswered
    } else if matches!(
        e.kind(),
        K::Server(
            S::BusyLoading
                | S::TryAgain
                | S::MasterDown
                | S::ClusterDown
                | S::ReadOnly
                | S::Moved
                | S::Ask
        )
    ) {
        Failure::Refused
    } else {
        Failure::Final
    }
}

/// What [`Failure`] a failed send of a [`Resend::Confirmed`] write is, as its send loop or
/// its `WAIT` reported it: a broken connection ([`ErrorKind::Connection`], whatever the driver
/// said: the send loop has resent what it could over that connection) or too few replicas
/// ([`ErrorKind::NotReplicated`]: the write may be lost by a failover) left the write
/// unconfirmed and may be sent again, over a fresh connection; anything else is final.
pub(crate) fn classify_unconfirmed(e: &Error) -> Failure {
    match e.kind() {
        ErrorKind::NotReplicated | ErrorKind::Connection => Failure::Unanswered,
        _ => Failure::Final,
    }
}

/// How a request may be sent again after a failure that allows it, and whether replicas must
/// confirm it: the one argument of [`Backend::eval`](super::Backend::eval) that says how a
/// script is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Resend<'k> {
    /// Never: a request that must not run twice, whose caller cannot know whether it ran.
    Never,
    /// Up to [`RESEND_DELAYS`]`.len()` times, after those pauses: an idempotent request
    /// (a read, or a script that answers a resend as it answered the first send).
    Few,
    /// Until `left` (the time that remains of the request's resend window) runs out, the
    /// last resend going out at the window's end: a request that a request latch makes
    /// idempotent, whose outcome the caller must resolve when no send was answered.
    Within { left: Duration },
    /// As [`Resend::Within`], for a latched write that replicas must confirm where the
    /// deployment asks for it (releases, count-downs, permits added): each send goes over a
    /// connection set aside for `key`'s master and is followed there by `WAIT`; a send whose
    /// answer or confirmation does not come ([`classify_unconfirmed`]) is sent again, over a
    /// fresh connection and with the same request id, until it is confirmed or `left` runs
    /// out. Where grants are not confirmed, exactly [`Resend::Within`].
    Confirmed { key: &'k str, left: Duration },
}

impl Resend<'_> {
    /// This rule `elapsed` after the first send: what remains of its window.
    pub(crate) fn after(self, elapsed: Duration) -> Self {
        match self {
            Resend::Within { left } => Resend::Within {
                left: left.saturating_sub(elapsed),
            },
            Resend::Confirmed { key, left } => Resend::Confirmed {
                key,
                left: left.saturating_sub(elapsed),
            },
            other => other,
        }
    }

    /// Whether the rule resends within a window, after which the caller must resolve a
    /// request whose sends went unanswered (its error says the outcome is unknown).
    pub(crate) fn latched(self) -> bool {
        matches!(self, Resend::Within { .. } | Resend::Confirmed { .. })
    }
}

/// After failure `failure` of send number `attempt` (0: the first send), the pause before
/// sending the request again, or `None` when the failure goes back to the caller. `pinned`:
/// the send went over a connection set aside for one grant, which does not reconnect (the
/// caller sends the grant again over a fresh one; a [`Resend::Confirmed`] write's resends
/// take a fresh connection each, so its loop passes `false`).
pub(crate) fn resend_after(
    failure: Failure,
    rule: Resend,
    attempt: usize,
    pinned: bool,
) -> Option<Duration> {
    if failure == Failure::Final || pinned {
        return None;
    }
    match rule {
        Resend::Never => None,
        Resend::Few => RESEND_DELAYS.get(attempt).copied(),
        Resend::Within { left } | Resend::Confirmed { left, .. } if left.is_zero() => None,
        Resend::Within { left } | Resend::Confirmed { left, .. } => {
            Some(resend_delay(attempt).min(left))
        }
    }
}

/// Pause before resend number `attempt` (0-based): 10 ms, 100 ms, 400 ms, then every second.
fn resend_delay(attempt: usize) -> Duration {
    RESEND_DELAYS
        .get(attempt)
        .copied()
        .unwrap_or(Duration::from_secs(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::{ErrorKind as K, RedisError, ServerErrorKind as S};
    use std::io;

    fn io(kind: io::ErrorKind) -> RedisError {
        RedisError::from(io::Error::new(kind, "test"))
    }

    fn server(kind: S, text: &'static str) -> RedisError {
        RedisError::from((K::Server(kind), text))
    }

    /// A window shrinks by the time since the first send, to zero; the other rules stay.
    #[test]
    fn a_rule_later_has_what_remains_of_its_window() {
        let ms = Duration::from_millis;
        let table = [
            (Resend::Never, Resend::Never),
            (Resend::Few, Resend::Few),
            (
                Resend::Within { left: ms(5_000) },
                Resend::Within { left: ms(3_000) },
            ),
            (
                Resend::Within { left: ms(1_000) },
                Resend::Within { left: ms(0) },
            ),
            (
                Resend::Confirmed {
                    key: "k",
                    left: ms(5_000),
                },
                Resend::Confirmed {
                    key: "k",
                    left: ms(3_000),
                },
            ),
        ];
        for (rule, expected) in table {
            assert_eq!(rule.after(ms(2_000)), expected, "{rule:?}");
        }
    }

    /// Each error the driver gives, and what it says about the request.
    #[test]
    fn errors_are_classified_by_whether_the_request_may_have_run() {
        use Failure::*;
        let table = [
            (io(io::ErrorKind::ConnectionReset), Unanswered),
            (io(io::ErrorKind::BrokenPipe), Unanswered),
            (io(io::ErrorKind::TimedOut), Unanswered),
            (io(io::ErrorKind::UnexpectedEof), Unanswered),
            (io(io::ErrorKind::ConnectionRefused), Refused),
            (server(S::BusyLoading, "LOADING"), Refused),
            (server(S::TryAgain, "TRYAGAIN"), Refused),
            (server(S::MasterDown, "MASTERDOWN"), Refused),
            (server(S::ClusterDown, "CLUSTERDOWN"), Refused),
            (server(S::ReadOnly, "READONLY"), Refused),
            (server(S::Moved, "MOVED"), Refused),
            (server(S::Ask, "ASK"), Refused),
            (server(S::ResponseError, "ERR script"), Final),
            (server(S::NoScript, "NOSCRIPT"), Final),
            (server(S::CrossSlot, "CROSSSLOT"), Final),
            (
                RedisError::from((K::Server(S::ResponseError), "WRONGTYPE")),
                Final,
            ),
            (
                RedisError::from((K::AuthenticationFailed, "WRONGPASS")),
                Final,
            ),
            (RedisError::from((K::UnexpectedReturnType, "shape")), Final),
        ];
        for (e, expected) in table {
            assert_eq!(classify(&e), expected, "{e:?}");
        }
    }

    /// A confirmed write's failures: resent after a broken connection (outcome unknown or
    /// not) or too few replicas, never after the server's answer.
    #[test]
    fn unconfirmed_writes_are_classified_by_whether_a_resend_may_confirm_them() {
        use Failure::*;
        let connection = || Error::new(ErrorKind::Connection, "broken");
        let table = [
            (connection(), Unanswered),
            (connection().outcome_unknown(), Unanswered),
            (Error::not_replicated("release", 0, 1), Unanswered),
            (
                Error::from_redis("release", io(io::ErrorKind::ConnectionReset)),
                Unanswered,
            ),
            (Error::new(ErrorKind::Backend, "ERR script"), Final),
            (Error::new(ErrorKind::NoPermission, "NOPERM"), Final),
            (Error::new(ErrorKind::WrongType, "WRONGTYPE"), Final),
            (Error::unexpected("shape"), Final),
        ];
        for (e, expected) in table {
            assert_eq!(classify_unconfirmed(&e), expected, "{e:?}");
        }
    }

    /// The resend rule, row by row: (failure, rule, attempt, pinned) → pause or give up.
    #[test]
    fn a_failed_send_is_resent_by_its_rule() {
        use Failure::*;
        let ms = Duration::from_millis;
        let within = |left| Resend::Within { left: ms(left) };
        let confirmed = |left| Resend::Confirmed {
            key: "k",
            left: ms(left),
        };
        let table = [
            // Nothing is resent after the server's answer, whatever the rule.
            (Final, Resend::Few, 0, false, None),
            (Final, within(5_000), 0, false, None),
            // Never: not even after a refusal where nothing ran.
            (Refused, Resend::Never, 0, false, None),
            (Unanswered, Resend::Never, 0, false, None),
            // Few: three resends, 10, 100 and 400 ms after.
            (Unanswered, Resend::Few, 0, false, Some(ms(10))),
            (Refused, Resend::Few, 1, false, Some(ms(100))),
            (Unanswered, Resend::Few, 2, false, Some(ms(400))),
            (Unanswered, Resend::Few, 3, false, None),
            // Within a window: every second after the first three, the last at its end.
            (Unanswered, within(5_000), 0, false, Some(ms(10))),
            (Refused, within(5_000), 3, false, Some(ms(1_000))),
            (Unanswered, within(5_000), 9, false, Some(ms(1_000))),
            (Unanswered, within(250), 3, false, Some(ms(250))),
            (Unanswered, within(0), 0, false, None),
            // A connection set aside for one grant: the caller resends over a fresh one.
            (Unanswered, Resend::Few, 0, true, None),
            (Refused, within(5_000), 0, true, None),
            // Confirmed: as a window (its loop takes a fresh connection for every resend).
            (Final, confirmed(5_000), 0, false, None),
            (Unanswered, confirmed(5_000), 0, false, Some(ms(10))),
            (Unanswered, confirmed(5_000), 4, false, Some(ms(1_000))),
            (Unanswered, confirmed(250), 3, false, Some(ms(250))),
            (Unanswered, confirmed(0), 0, false, None),
        ];
        for (failure, rule, attempt, pinned, expected) in table {
            assert_eq!(
                resend_after(failure, rule, attempt, pinned),
                expected,
                "{failure:?} {rule:?} attempt {attempt} pinned {pinned}"
            );
        }
    }
}
