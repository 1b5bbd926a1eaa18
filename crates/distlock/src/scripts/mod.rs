//! The Lua scripts, one `.lua` file each; every file's header lists its KEYS, ARGV and
//! return values. They are compiled into the binary, hashed once, and run by `EVALSHA`; a
//! `NOSCRIPT` answer (a server restart, `SCRIPT FLUSH`, a promoted replica) is followed by one
//! `EVAL` of the full text on the same connection — on a Cluster that is the node the key
//! routes to, so a node that is down elsewhere cannot fail it (redis-rs's own recovery sends
//! `SCRIPT LOAD` to every node and fails while any is down).
//!
//! Every script is run with `publish.lua` joined in front (its `publish(channel, message)` is
//! how scripts wake waiters), in one of three variants chosen by the client's
//! [`Publish`] mode: `PUBLISH`, `SPUBLISH` or both — except those marked `(no_publish)`, which
//! never wake anyone and run alone (defining the helper costs every run of a script: about
//! 1,000 instructions on Redis 7.0, a thirtieth of a renewal). Scripts marked `with "prelude.lua"` also
//! get `prelude.lua` (local helper functions: exact fencing tokens from the lock's per-slot
//! counter, server time in ms from one `TIME` per run, a TTL that must not fail half-way)
//! joined in front of their text at build time; the scripts that delete or rewrite a key
//! whoever holds it (the force-unlocks, the latch's delete, the semaphores' drain and size)
//! get `shapes.lua` (what a lock hash and a count look like: a key that holds anything else,
//! a user's data under a mistyped name, is refused and left unchanged); the leased-semaphore
//! scripts also get `leases.lua` (migration of the old leases key, Redisson's reclaim of
//! ended leases; the acquire and release also `permit_queue.lua`, direct hand-off to queued
//! waiters), the plain lock's scripts `handoff.lua` (direct hand-off to queued waiters), the
//! fair-lock scripts `handoff.lua` and `fair.lua` (Redisson's queue score arithmetic, dead
//! waiters at the head, hand-off to the head), and the read-write lock's write acquire,
//! releases and writer leave `handoff.lua` and `rw_handoff.lua` (the write lock handed to
//! queued writers).
//!
//! The plain, fair, read and write locks' common cases also have fast paths (`*_acquire_fast.lua`: a
//! free lock nobody queues for; `*_release_fast.lua`: the last hold, nobody queued): short
//! scripts with two keys and four arguments or fewer, joined at most with `fast.lua` (the
//! acquires' fencing token), sent in place of the full script on a request's first send
//! ([`FastPath`]). They answer nil, having changed nothing, for every other case, and the full
//! script is sent next; a lock handle that met contention lately sends the full scripts
//! directly. Counted on Redis 7.0 (`tools/script-cost`), an
//! uncontended plain-lock acquire + release costs the server about 110,000 instructions this
//! way, against 171,800 through the full scripts. With a token generation (Sentinel, Cluster)
//! the acquires' fast path counts on in the counter's own generation only. The leased
//! semaphore has the same pair (`leased_acquire_fast.lua`: an available permit for a permit id
//! never sent before, nobody queued; `leased_release_fast.lua`: a permit whose holder still
//! counts on its lease, nobody queued): about 103,000 instructions per pair against 186,000
//! through the full scripts.

use std::sync::atomic::Ordering;
use std::sync::LazyLock;

#[cfg(test)]
use redis::Value;
use redis::{Cmd, ToRedisArgs};

pub(crate) use later::FastPath;
use later::{Later, ANSWERED, DEFERRED, SENT, UNSENT};
use packed::{Call, Packed, PackedWriter};

/// How scripts publish wake-ups: which variant of each script a client runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Publish {
    /// `PUBLISH`: classic pub/sub (every deployment; a Cluster forwards it to every node).
    #[default]
    Classic,
    /// `SPUBLISH`: sharded pub/sub, delivered only on the channel's slot (Redis 7 Cluster).
    Sharded,
    /// Both, for fleets whose other clients listen one way or the other.
    Both,
}

impl Publish {
    fn index(self) -> usize {
        match self {
            Publish::Classic => 0,
            Publish::Sharded => 1,
            Publish::Both => 2,
        }
    }
}

/// The negative replies the scripts share, by name: each `.lua` header lists the ones it
/// returns by these names (`GONE`, …), and the engine and the primitives match these
/// constants, never the bare integers. A script answers them alone (`-1`) or as the first
/// element of its reply (`{-1}`).
pub(crate) mod reply {
    /// `-1`: not held, nothing there: the lock, hold, permit id or job lock is gone (its
    /// lease ended, or it was released or never taken), or nothing was given back.
    pub(crate) const GONE: i64 = -1;
    /// `-2`: not held by this owner: another owner (or another job lock value) holds it.
    pub(crate) const HELD_BY_OTHER: i64 = -2;
    /// `-3`: refused: this owner holds only read locks on it, so a write lock would wait for
    /// itself (an upgrade).
    pub(crate) const READ_HELD: i64 = -3;
    /// `-4`: this request was cancelled (its latch says so) after its outcome was unknown:
    /// it grants nothing.
    pub(crate) const CANCELLED: i64 = -4;

    /// Every name with its code, for the test that the `.lua` headers cite them.
    #[cfg(test)]
    pub(crate) const ALL: [(&str, i64); 4] = [
        ("GONE", GONE),
        ("HELD_BY_OTHER", HELD_BY_OTHER),
        ("READ_HELD", READ_HELD),
        ("CANCELLED", CANCELLED),
    ];
}

/// The body of `publish()` in `publish.lua`, and its replacements per [`Publish`] mode.
const CLASSIC_BODY: &str = "  redis.pcall('publish', channel, message)\n";
const BODIES: [&str; 3] = [
    CLASSIC_BODY,
    "  redis.pcall('spublish', channel, message)\n",
    "  redis.pcall('publish', channel, message)\n  redis.pcall('spublish', channel, message)\n",
];

/// How a client calls its scripts, chosen at connect: which publish variant, and whether
/// through its variant's Redis Functions library ([`functions`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Via {
    /// Which variant of the scripts runs: how they publish wake-ups.
    pub(crate) publish: Publish,
    /// `FCALL` of the library's functions (loaded at connect), else `EVALSHA`.
    pub(crate) functions: bool,
}

/// One script in its three publish variants: the text as run, its SHA-1, and the name of
/// its function in the variant's library (made on first use).
pub(crate) struct Script {
    texts: [String; 3],
    hashes: [String; 3],
    functions: [std::sync::OnceLock<String>; 3],
}

impl Script {
    /// The variants of `classic` (the text with `publish.lua` as written joined in front; or,
    /// for a script that publishes nothing, the text alone, the same in every variant).
    fn new(classic: &str) -> Script {
        let texts = if classic.contains(CLASSIC_BODY) {
            BODIES.map(|body| classic.replacen(CLASSIC_BODY, body, 1))
        } else {
            assert!(!classic.contains("publish("), "publish.lua not joined");
            std::array::from_fn(|_| classic.to_string())
        };
        let hashes = std::array::from_fn(|i| redis::Script::new(&texts[i]).get_hash().to_string());
        Script {
            texts,
            hashes,
            functions: Default::default(),
        }
    }

    /// The SHA-1 of the text run in `mode`.
    pub(crate) fn hash(&self, mode: Publish) -> &str {
        &self.hashes[mode.index()]
    }

    /// The name of this script's function in `mode`'s library.
    pub(super) fn function(&self, mode: Publish) -> &str {
        self.functions[mode.index()]
            .get_or_init(|| functions::Library::of(mode).function(self.hash(mode)))
    }

    /// The text run in `mode`.
    pub(crate) fn text(&self, mode: Publish) -> &str {
        &self.texts[mode.index()]
    }

    /// Start a call of this script: add keys and arguments, then send it through the
    /// connection layer.
    pub(crate) fn prepare_invoke(&'static self) -> Invocation<'static> {
        Invocation {
            script: self,
            packed: Packed::default(),
            later: None,
        }
    }
}

/// A call's script, keys and arguments, as the model of the protocol runs them.
#[cfg(test)]
pub(crate) type Parts = (&'static Script, Vec<Vec<u8>>, Vec<Vec<u8>>);

/// One call of a script: its keys and arguments, or how to build them (`'a`: what the
/// builder borrows).
#[derive(Clone)]
pub(crate) struct Invocation<'a> {
    script: &'static Script,
    packed: Packed,
    later: Option<Later<'a>>,
}

impl<'a> Invocation<'a> {
    /// A request that tries `fast` on its first send and builds its full call with `build`
    /// only when a send needs it (the fast path answered nil, or a resend). Clones of the
    /// invocation are one request: only the first send of any of them tries the fast path,
    /// and the full call is built once for all of them.
    pub(crate) fn later(
        build: impl Fn() -> Invocation<'static> + Send + Sync + 'a,
        fast: FastPath,
    ) -> Invocation<'a> {
        Invocation {
            // Not sent: the built call carries its own script.
            script: fast.script,
            packed: Packed::default(),
            later: Some(Later::new(Some(fast), build)),
        }
    }

    /// A call of `script` routed by `route` (its first key) that `build` builds at its first
    /// send, once for the request and every clone of it: for a call whose arguments depend
    /// on when it is sent (a request record's epoch, taken at the first send).
    pub(crate) fn at_first_send(
        script: &'static Script,
        route: &str,
        build: impl Fn() -> Invocation<'static> + Send + Sync + 'a,
    ) -> Invocation<'a> {
        // Not sent: the built call carries its own; this one holds the route key only.
        let mut inv: Invocation<'a> = script.prepare_invoke();
        inv.key(route);
        inv.later = Some(Later::new(None, build));
        inv
    }

    /// The full call: this call, or the call built for it.
    fn full(&self) -> Call<'_> {
        match &self.later {
            Some(later) => later
                .shared
                .built
                .get_or_init(|| Box::new((later.shared.build)()))
                .full(),
            None => Call {
                script: self.script,
                packed: &self.packed,
            },
        }
    }

    /// The full call's script, keys and arguments (built now if it is built later), for the
    /// model of the protocol, which runs them.
    #[cfg(test)]
    pub(crate) fn parts(&self) -> Parts {
        self.full().parts()
    }

    /// The fast path's script, keys and arguments, when the call has one (whether or not it
    /// was sent), for the model.
    #[cfg(test)]
    pub(crate) fn fast_parts(&self) -> Option<Parts> {
        self.later
            .as_ref()
            .and_then(|l| l.fast.as_ref())
            .map(|f| f.call().parts())
    }

    /// The fast path's reply `v` in the full script's shape (as the connection layer gives
    /// it to the caller), for the model.
    #[cfg(test)]
    pub(crate) fn fast_shape(&self, v: Value) -> Value {
        match self.later.as_ref().and_then(|l| l.fast.as_ref()) {
            Some(f) => (f.reply)(v),
            None => v,
        }
    }

    /// The key the call is routed by: its script's first key (for a call built later, its
    /// fast path's, the same lock key); a Cluster sends the call to that key's master.
    pub(crate) fn route_key(&self) -> &[u8] {
        let packed = match self.later.as_ref().and_then(|l| l.fast.as_ref()) {
            Some(fast) => &fast.packed,
            None => &self.packed,
        };
        packed.keys().next().unwrap_or(&[])
    }

    /// Add a key (`KEYS[n]`).
    pub(crate) fn key<T: ToRedisArgs>(&mut self, key: T) -> &mut Self {
        debug_assert!(self.later.is_none(), "a call built later takes no keys");
        key.write_redis_args(&mut PackedWriter {
            packed: &mut self.packed,
            arg: false,
        });
        self
    }

    /// Add keys, in order.
    pub(crate) fn keys<T: ToRedisArgs>(&mut self, keys: impl IntoIterator<Item = T>) -> &mut Self {
        for key in keys {
            self.key(key);
        }
        self
    }

    /// Add an argument (`ARGV[n]`).
    pub(crate) fn arg<T: ToRedisArgs>(&mut self, arg: T) -> &mut Self {
        debug_assert!(
            self.later.is_none(),
            "a call built later takes no arguments"
        );
        arg.write_redis_args(&mut PackedWriter {
            packed: &mut self.packed,
            arg: true,
        });
        self
    }

    /// Whether this request's fast path answered nil, leaving it to the full script.
    pub(crate) fn fast_deferred(&self) -> bool {
        self.fast_state() == Some(DEFERRED)
    }

    /// Whether the reply came from this request's fast script itself: not nil, and not from
    /// the full script a resend (after a broken connection) or a nil answer went to.
    pub(crate) fn fast_answered(&self) -> bool {
        self.fast_state() == Some(ANSWERED)
    }

    fn fast_state(&self) -> Option<u8> {
        self.later
            .as_ref()
            .filter(|l| l.fast.is_some())
            .map(|l| l.shared.state.load(Ordering::Acquire))
    }

    /// The request's fast path, to send now: only on the request's first send.
    fn fast_first(&self) -> Option<(&Later<'a>, &FastPath)> {
        let later = self.later.as_ref()?;
        let fast = later.fast.as_ref()?;
        later
            .shared
            .state
            .compare_exchange(UNSENT, SENT, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
            .then_some((later, fast))
    }

    /// `EVALSHA` of the variant for `mode` (of the full call, built now if it is built later).
    pub(crate) fn evalsha(&self, mode: Publish) -> Cmd {
        self.full().evalsha(mode)
    }

    /// `EVAL` of the variant for `mode` (the full text).
    #[cfg(test)]
    pub(crate) fn eval(&self, mode: Publish) -> Cmd {
        self.full().eval(mode)
    }
}

/// The SHA-1 of each variant of the script `file` (see [`Publish`]), in [`Publish`] order.
pub(crate) fn variant_hashes(file: &str) -> Option<&'static [String; 3]> {
    let i = RUNNABLE.iter().position(|(f, _)| *f == file)?;
    let script: &'static Script = ALL[i];
    Some(&script.hashes)
}

/// `publish.lua`, joined in front of a script unless it is marked `(no_publish)`.
macro_rules! publish_helper {
    () => {
        include_str!("publish.lua")
    };
    (no_publish) => {
        ""
    };
}

macro_rules! scripts {
    ($($(#[$doc:meta])* $name:ident => $file:literal $(with $($prelude:literal)+)? $(($alone:ident))?,)*) => {
        $(
            $(#[$doc])*
            pub(crate) static $name: LazyLock<Script> = LazyLock::new(|| {
                Script::new(concat!(
                    publish_helper!($($alone)?),
                    $($(include_str!($prelude),)+)?
                    include_str!($file)
                ))
            });
        )*
        /// Every script, for loading them all at once.
        pub(crate) static ALL: &[&LazyLock<Script>] = &[$(&$name,)*];
        /// Each script file's own text, by file name (what its header documents).
        #[cfg(test)]
        pub(crate) const SOURCES: &[(&str, &str)] = &[$(($file, include_str!($file)),)*];
        /// Every script as it is run with classic `PUBLISH`, by file name: its file's text
        /// with `publish.lua` and the helpers it uses joined in front. For tools and tests
        /// that run them directly.
        pub(crate) const RUNNABLE: &[(&str, &str)] = &[$((
            $file,
            concat!(publish_helper!($($alone)?), $($(include_str!($prelude),)+)? include_str!($file)),
        ),)*];
    };
}

/// The `publish()` helper joined in front of every script.
#[cfg(test)]
const PUBLISH: &str = include_str!("publish.lua");
/// The helpers joined in front of the scripts that issue fencing tokens or read server time.
#[cfg(test)]
const PRELUDE: &str = include_str!("prelude.lua");
/// The fast-path acquires' token helper, joined in front of them (and nothing else).
#[cfg(test)]
const FAST: &str = include_str!("fast.lua");
/// The refusal of another kind's data, joined (after the prelude, where it is joined) in front
/// of the scripts that check what kind a key holds.
#[cfg(test)]
const KINDS: &str = include_str!("kinds.lua");
/// The shape checks of distlock's data, joined (after the prelude and the refusal of another
/// kind's data, where those are joined) in front of the scripts that delete or rewrite a key
/// whoever holds it: the force-unlocks, a latch's delete, a semaphore's drain and size.
#[cfg(test)]
const SHAPES: &str = include_str!("shapes.lua");
/// The helpers joined (after the prelude) in front of the leased-semaphore scripts.
#[cfg(test)]
const LEASES: &str = include_str!("leases.lua");
/// The direct hand-off helpers joined (after the leases helpers) in front of the leased
/// semaphore's acquire and release.
#[cfg(test)]
const PERMIT_QUEUE: &str = include_str!("permit_queue.lua");
/// The helpers joined (after the prelude and the hand-off helpers) in front of the fair-lock
/// scripts.
#[cfg(test)]
const FAIR: &str = include_str!("fair.lua");
/// The direct hand-off helpers joined (after the prelude) in front of the plain lock's
/// acquire, release and leave, of the fair-lock scripts, and of the read-write scripts that
/// hand the write lock off.
#[cfg(test)]
const HANDOFF: &str = include_str!("handoff.lua");
/// The write lock's hand-off helpers, joined after the prelude and the hand-off helpers in
/// front of the read-write lock's write acquire, releases and writer leave.
#[cfg(test)]
const RW_HANDOFF: &str = include_str!("rw_handoff.lua");

scripts! {
    /// The plain lock's common acquire (a free lock nobody queues for), or nil.
    LOCK_ACQUIRE_FAST => "lock_acquire_fast.lua" with "fast.lua",
    /// The plain lock's common release (the last hold, nobody queued), or nil.
    LOCK_RELEASE_FAST => "lock_release_fast.lua",
    /// Grant or re-enter a lock and issue its fencing token.
    LOCK_ACQUIRE => "lock_acquire.lua" with "prelude.lua" "kinds.lua" "handoff.lua",
    /// Release one hold; hand the lock to the first queued waiter on the last, or publish
    /// the unlock message.
    LOCK_RELEASE => "lock_release.lua" with "prelude.lua" "handoff.lua",
    /// Leave a plain lock's hand-off queue, giving back a hand-off that raced the leave.
    LOCK_LEAVE => "lock_leave.lua" with "prelude.lua" "handoff.lua",
    /// Renew many leases at once (the watchdog's batch).
    LOCK_RENEW => "lock_renew.lua",
    /// Renew one lease (an extension, or a watchdog batch of one), answered by an integer.
    LOCK_RENEW_ONE => "lock_renew_one.lua" (no_publish),
    /// Delete a lock whoever holds it and wake its waiters.
    LOCK_FORCE_UNLOCK => "lock_force_unlock.lua" with "kinds.lua" "shapes.lua",
    /// One owner's hold count, token and TTL.
    LOCK_INSPECT => "lock_inspect.lua",
    /// Take a job lock if free; WRONGTYPE for a key of another type.
    JOB_ACQUIRE => "job_acquire.lua",
    /// Release a job lock if ours (delete, or keep for the at-least time).
    JOB_RELEASE => "job_release.lua",
    /// Extend a job lock if ours.
    JOB_EXTEND => "job_extend.lua",
    /// Delete a job lock whoever holds it; WRONGTYPE for a key that is not one.
    JOB_FORCE_UNLOCK => "job_force_unlock.lua",
    /// The fair lock's common acquire (free, nobody queued), or nil.
    FAIR_ACQUIRE_FAST => "fair_acquire_fast.lua" with "fast.lua",
    /// The fair lock's common release (the last hold, nobody queued), or nil.
    FAIR_RELEASE_FAST => "fair_release_fast.lua",
    /// Grant a fair lock or queue the caller (liveness by server time).
    FAIR_ACQUIRE => "fair_acquire.lua" with "prelude.lua" "kinds.lua" "handoff.lua" "fair.lua",
    /// Release one hold of a fair lock; hand the lock to the head waiter on the last, or
    /// wake it.
    FAIR_RELEASE => "fair_release.lua" with "prelude.lua" "handoff.lua" "fair.lua",
    /// Leave a fair queue (cancel, timeout; giving back a racing hand-off) or force-unlock;
    /// hand the lock to the head or wake it.
    FAIR_LEAVE => "fair_leave.lua" with "prelude.lua" "kinds.lua" "shapes.lua" "handoff.lua" "fair.lua",
    /// The read-write lock's common read acquire (free, no writer waiting), or nil.
    RW_READ_ACQUIRE_FAST => "rw_read_acquire_fast.lua" with "fast.lua",
    /// The read-write lock's common read release (the only reader's last hold, nobody
    /// queued), or nil.
    RW_READ_RELEASE_FAST => "rw_read_release_fast.lua",
    /// Take a read hold (write-preferring).
    RW_READ_ACQUIRE => "rw_read_acquire.lua" with "prelude.lua" "kinds.lua",
    /// The read-write lock's common write acquire (free, no writer waiting), or nil.
    RW_WRITE_ACQUIRE_FAST => "rw_write_acquire_fast.lua" with "fast.lua",
    /// The read-write lock's common write release (the last hold, nobody queued), or nil.
    RW_WRITE_RELEASE_FAST => "rw_write_release_fast.lua",
    /// Take a write hold; register as a waiting writer when refused.
    RW_WRITE_ACQUIRE => "rw_write_acquire.lua" with "prelude.lua" "kinds.lua" "handoff.lua" "rw_handoff.lua",
    /// Release one read hold.
    RW_READ_RELEASE => "rw_read_release.lua" with "prelude.lua" "handoff.lua" "rw_handoff.lua",
    /// Release one write hold.
    RW_WRITE_RELEASE => "rw_write_release.lua" with "prelude.lua" "handoff.lua" "rw_handoff.lua",
    /// Renew read holds (watchdog batch or extension).
    RW_READ_RENEW => "rw_read_renew.lua",
    /// A waiting writer gives up.
    RW_WRITER_LEAVE => "rw_writer_leave.lua" with "prelude.lua" "handoff.lua" "rw_handoff.lua",
    /// Set a latch's count if it has none.
    LATCH_SET => "latch_set.lua",
    /// Count a latch down; wake all at zero.
    LATCH_COUNT_DOWN => "latch_count_down.lua" with "kinds.lua",
    /// Delete a latch; WRONGTYPE for a key that is not a latch's count.
    LATCH_DELETE => "latch_delete.lua" with "shapes.lua",
    /// Set a semaphore's permits if it has none.
    SEMAPHORE_SET => "semaphore_set.lua",
    /// Take k permits, all or nothing, recording the grant.
    SEMAPHORE_ACQUIRE => "semaphore_acquire.lua" with "kinds.lua",
    /// Give back permits, at most once per request.
    SEMAPHORE_RELEASE => "semaphore_release.lua",
    /// Give back the permits of an acquire of unknown outcome (tombstone).
    SEMAPHORE_GIVE_BACK => "semaphore_give_back.lua",
    /// Take every available permit.
    SEMAPHORE_DRAIN => "semaphore_drain.lua" with "shapes.lua",
    /// The leased semaphore's common acquire (a permit available to a fresh id, nobody
    /// queued), or nil.
    LEASED_ACQUIRE_FAST => "leased_acquire_fast.lua",
    /// The leased semaphore's common release (a permit its holder counts on, nobody queued),
    /// or nil.
    LEASED_RELEASE_FAST => "leased_release_fast.lua",
    /// Take one leased permit, reclaiming expired ones; queue for a hand-off when refused.
    LEASED_ACQUIRE => "leased_acquire.lua" with "prelude.lua" "kinds.lua" "leases.lua" "permit_queue.lua",
    /// Give back a leased permit (to the first queued waiter, when there is one), or leave
    /// the queue.
    LEASED_RELEASE => "leased_release.lua" with "prelude.lua" "leases.lua" "permit_queue.lua",
    /// Move a leased permit's expiry.
    LEASED_EXTEND => "leased_extend.lua" with "prelude.lua" "leases.lua",
    /// Reclaim expired leases; report available and leased.
    LEASED_AVAILABLE => "leased_available.lua" with "prelude.lua" "leases.lua",
    /// Set a leased semaphore's size, keeping held permits (Redisson's `setPermits`).
    LEASED_SET_PERMITS => "leased_set_permits.lua" with "prelude.lua" "shapes.lua" "leases.lua",
    /// Cancel a request of unknown outcome through its latch (tombstone).
    LATCH_CANCEL => "latch_cancel.lua",
}

pub(crate) mod functions;
mod later;
mod packed;
mod send;
#[cfg(test)]
mod tests;
