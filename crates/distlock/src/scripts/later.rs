//! A request's fast path and its full call built later ([`Later`]), or at its first send.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use redis::{FromRedisValue, Value};

use super::packed::{Call, Packed};
use super::{Invocation, Script};

/// A request's fast path, tried first, and its full call, built only when a send needs it:
/// when the fast path answered nil, or for a resend. An uncontended request never builds it
/// (its keys, arguments and their allocations are most of the client's work per request).
/// Without a fast path, the full call is built at the request's first send
/// ([`Invocation::at_first_send`]).
#[derive(Clone)]
pub(super) struct Later<'a> {
    pub(super) fast: Option<FastPath>,
    /// Where the request stands, and how its full call is built: one allocation, shared by
    /// the clones of the invocation that carry the same request.
    pub(super) shared: Arc<Shared<dyn Fn() -> Invocation<'static> + Send + Sync + 'a>>,
}

/// What the clones of one request share ([`Later`]): `state`, [`UNSENT`], [`SENT`],
/// [`DEFERRED`] or [`ANSWERED`], the full call once built (one for every clone: a call built
/// from the clock is built once), and its builder.
pub(super) struct Shared<B: ?Sized> {
    pub(super) state: AtomicU8,
    pub(super) built: std::sync::OnceLock<Box<Invocation<'static>>>,
    pub(super) build: B,
}

/// A short script sent in place of a request's full script on the request's first send only:
/// it does the common case with the least server work and answers nil, having changed
/// nothing, for everything else, which the full script then does. A resend (after a broken
/// connection) always goes to the full script, which recognises a resent request (its owner
/// field, its latch) whichever script ran first.
#[derive(Clone)]
pub(crate) struct FastPath {
    pub(super) script: &'static Script,
    pub(super) packed: Packed,
    /// The fast script's reply in the full script's shape.
    pub(super) reply: fn(Value) -> Value,
}

/// A [`FastPath`]'s request not sent yet.
pub(super) const UNSENT: u8 = 0;
/// Sent once: any further send is a resend, for the full script.
pub(super) const SENT: u8 = 1;
/// The fast script answered nil: the full script ran.
pub(super) const DEFERRED: u8 = 2;
/// The fast script's own answer is the request's reply (neither nil nor a resend's).
pub(super) const ANSWERED: u8 = 3;

impl FastPath {
    /// `call` (a fast script's call) for a request not sent yet; `reply` puts a non-nil answer
    /// of it in the full script's reply shape.
    pub(crate) fn new(call: Invocation<'static>, reply: fn(Value) -> Value) -> FastPath {
        debug_assert!(call.later.is_none(), "a fast path is a plain call");
        FastPath {
            script: call.script,
            packed: call.packed,
            reply,
        }
    }

    /// The fast script's call, to send.
    pub(super) fn call(&self) -> Call<'_> {
        Call {
            script: self.script,
            packed: &self.packed,
        }
    }
}

impl<'a> Later<'a> {
    /// A request not sent yet whose full call `build` builds (once, for every clone), tried
    /// first as `fast` where there is one.
    pub(super) fn new(
        fast: Option<FastPath>,
        build: impl Fn() -> Invocation<'static> + Send + Sync + 'a,
    ) -> Later<'a> {
        Later {
            fast,
            shared: Arc::new(Shared {
                state: AtomicU8::new(UNSENT),
                built: std::sync::OnceLock::new(),
                build,
            }),
        }
    }

    /// The fast script's answer `v` in the full script's shape (recorded as answered), or
    /// `None` (recorded as deferred) when it is nil and the full script must run.
    pub(super) fn answer<T: FromRedisValue>(
        &self,
        fast: &FastPath,
        v: Value,
    ) -> Option<redis::RedisResult<T>> {
        if v == Value::Nil {
            self.shared.state.store(DEFERRED, Ordering::Release);
            return None;
        }
        self.shared.state.store(ANSWERED, Ordering::Release);
        Some(T::from_redis_value((fast.reply)(v)).map_err(Into::into))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::super::{Invocation, SEMAPHORE_RELEASE};

    /// A call built at its first send is built once for the request and every clone of it
    /// (a record taken from the clock names one set for every send), routed by its key
    /// before it is built, and has no fast path.
    #[test]
    fn a_call_built_at_its_first_send_is_built_once_for_every_clone() {
        let builds = std::sync::Arc::new(AtomicUsize::new(0));
        let counted = builds.clone();
        let inv = Invocation::at_first_send(&SEMAPHORE_RELEASE, "sem", move || {
            let n = counted.fetch_add(1, Ordering::SeqCst);
            let mut full = SEMAPHORE_RELEASE.prepare_invoke();
            full.key("sem").arg(n);
            full
        });
        assert_eq!(inv.route_key(), b"sem");
        assert!(inv.fast_first().is_none());
        let clone = inv.clone();
        assert_eq!(builds.load(Ordering::SeqCst), 0, "built before a send");
        let (_, keys, args) = inv.parts();
        let (_, clone_keys, clone_args) = clone.parts();
        assert_eq!(
            (clone_keys, clone_args),
            (keys.clone(), args.clone()),
            "a clone sends the same call"
        );
        assert_eq!(inv.parts().2, args);
        assert_eq!(builds.load(Ordering::SeqCst), 1);
        assert!(!inv.fast_deferred() && !inv.fast_answered());
    }
}
