//! Where the records of a semaphore's and a latch's requests live ([`Record`]).

use super::Digits;

/// The records of one semaphore grant, release or latch count-down as older distlock versions
/// kept them, a string key per request: `distlock_semaphore_grant:{<name>}:<request-id>`,
/// `distlock_semaphore_release:{…}:…`, `distlock_latch_count_down:{…}:…` (no longer written;
/// left ones expire with their TTL).
pub const LEGACY_REQUEST_RECORD_PREFIXES: [&str; 3] = [
    "distlock_semaphore_grant",
    "distlock_semaphore_release",
    "distlock_latch_count_down",
];
/// How many consecutive request numbers of a client share a record set (within an epoch):
/// see [`Record`]. The scripts' request members are the numbers 1 to it (`latch_count_down.lua`
/// encodes and decodes a count-down's count with it).
pub(crate) const RECORD_BLOCK: u64 = 64;

/// Which requests a record set holds: each kind counts its requests on a sequence of its
/// own per client ([`crate::Client`]'s record sequences), so that a block of
/// [`RECORD_BLOCK`] numbers is one set's worth of that kind's requests, however the client's
/// other requests (locks, the other kinds) interleave with them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RecordKind {
    /// A semaphore acquire's grant (`distlock_semaphore_grants`).
    Grant,
    /// A semaphore release (`distlock_semaphore_releases`).
    Release,
    /// A latch count-down (`distlock_latch_count_downs`).
    CountDown,
}

impl RecordKind {
    /// How many kinds there are: a client keeps one request sequence per kind.
    pub(crate) const COUNT: usize = 3;

    /// The prefix of the kind's record sets (as [`super::semaphore_grant_latch`] and its
    /// siblings name them): `<prefix>:{key}:<client-id>:<epoch>:<block>`.
    fn prefix(self) -> &'static str {
        match self {
            RecordKind::Grant => super::SEMAPHORE_GRANT_LATCH_PREFIX,
            RecordKind::Release => super::SEMAPHORE_RELEASE_LATCH_PREFIX,
            RecordKind::CountDown => super::LATCH_COUNT_DOWN_LATCH_PREFIX,
        }
    }

    /// The index of the kind's sequence among a client's record sequences.
    pub(crate) fn index(self) -> usize {
        const { assert!(RecordKind::CountDown as usize + 1 == RecordKind::COUNT) };
        self as usize
    }
}

/// Where one request of a counting primitive (a semaphore's acquire or release, a latch's
/// count-down) is recorded: the member `field` (`<sequence> % RECORD_BLOCK + 1`, never 0,
/// the set's own member) of the set `key`,
/// which holds the records of its client's requests begun in one epoch of its clock (epochs
/// are one latch TTL long) whose sequence numbers share a block of [`RECORD_BLOCK`]
/// (`<sequence> / RECORD_BLOCK`). Every send of the request names the same member of the same
/// set.
///
/// The scripts claim a record with one `SADD` of the member `0` and the request's member: its
/// answer says whether the set was just created (both new), and that write gives the set its
/// TTL: to the end of its epoch plus [`Record::keep_ms`], so that every record in it, written
/// by a send made within the epoch and arriving within a latch TTL of it, lives at least its
/// lifetime. A send made after the epoch ended (an acquire that waited) sets the TTL on every
/// claim, to `keep_ms` from then (never shorter than what the set's other records need).
///
/// A member of an existing set costs the server about 7,500 instructions on Redis 7.0; a fresh
/// key with a TTL per request, as before, about 18,000. The block keeps each set small (a small
/// set on Redis 7.2+ and Valkey is a listpack, whose lookups are linear).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Record {
    /// The set.
    pub(crate) key: String,
    /// The request's member.
    pub(crate) field: String,
    /// When the set's epoch ends (ms on the client's record clock).
    epoch_end_ms: u64,
    /// The records' lifetime plus a latch TTL (the longest a send takes to arrive).
    keep_ms: u64,
}

impl Record {
    /// The record of request `seq` of `kind` of client `client_id` over `key`, begun at
    /// `now_ms` on the client's record clock, in the kind's set
    /// `<prefix>:{key}:<client-id>:<epoch>:<block>`, living at least `lifetime_ms` ms; epochs
    /// are `latch_ms` long.
    pub(crate) fn new(
        kind: RecordKind,
        key: &str,
        client_id: &str,
        seq: u64,
        now_ms: u64,
        latch_ms: u64,
        lifetime_ms: u64,
    ) -> Record {
        let latch_ms = latch_ms.max(1);
        let epoch = now_ms / latch_ms;
        // Built in one allocation, as every helper name is (it is built per request).
        let (epoch_digits, block) = (Digits::of(epoch), Digits::of(seq / RECORD_BLOCK));
        let tail = [client_id, ":", epoch_digits.as_str(), ":", block.as_str()];
        Record {
            key: super::tagged(Some(kind.prefix()), key, &tail),
            field: Digits::of(seq % RECORD_BLOCK + 1).as_str().to_string(),
            epoch_end_ms: (epoch + 1) * latch_ms,
            keep_ms: lifetime_ms + latch_ms,
        }
    }

    /// The TTL (ms) that a send made at `now_ms` gives the set, and whether the send is late
    /// (made after the epoch ended: it sets that TTL on every claim).
    pub(crate) fn ttl(&self, now_ms: u64) -> (u64, bool) {
        match self.epoch_end_ms.checked_sub(now_ms) {
            Some(left) if left > 0 => (left + self.keep_ms, false),
            _ => (self.keep_ms, true),
        }
    }
}
