//! The values of the lock family: [`Owner`], [`FencingToken`], [`LockStatus`].

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::error::{Error, Result};
use crate::keys::{HOLDER_FIELD, TOKEN_FIELD};
#[cfg(doc)]
use crate::{ErrorKind, Lock};

/// Longest owner string accepted, in bytes.
const MAX_OWNER_LEN: usize = 512;

/// Who holds a lock: the hash field `<client-uuid>:<owner-id>`.
///
/// Owners are values: clone one, send it to another task, or serialize it with
/// [`Owner::as_str`] and [`Owner::parse`] to hand a held lock to another process
/// ([`Lock::adopt`]).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Owner(Arc<str>);

impl Owner {
    pub(crate) fn from_parts(client_id: &str, n: u64) -> Owner {
        Owner(format!("{client_id}:{n}").into())
    }

    /// An owner from its string form `<client-id>:<owner-id>` (e.g. a Redisson
    /// `<uuid>:<threadId>` field).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] when either part is empty, the string has no `:`, is longer
    /// than 512 bytes, or is one of the reserved field names (the fencing token's, the
    /// holder metadata's).
    pub fn parse(s: &str) -> Result<Owner> {
        let valid = s.len() <= MAX_OWNER_LEN
            && s != TOKEN_FIELD
            && s != HOLDER_FIELD
            && matches!(s.rsplit_once(':'), Some((a, b)) if !a.is_empty() && !b.is_empty());
        if !valid {
            return Err(Error::invalid(format!(
                "owner {s:?} is not of the form <client-id>:<owner-id> (at most {MAX_OWNER_LEN} bytes)"
            )));
        }
        Ok(Owner(s.into()))
    }

    /// The hash field this owner holds a lock under.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Owner({})", self.0)
    }
}

/// A fencing token: a number issued with every grant, strictly increasing per lock name
/// across releases, expiries, a server restart from an older snapshot and a failover to a
/// replica that missed the last writes (as long as server clocks agree within the failover
/// time). Pass it with every write to the protected resource and have the resource refuse a
/// token lower than the highest it has seen: a holder that was paused past its lease is
/// then refused.
///
/// Tokens are `max(last + 1, server TIME in µs)`, kept in one counter key per cluster hash
/// slot ([`Lock::fencing_counter_key`]: strictly increasing per name, and across the names
/// of one slot, not across slots), computed by decimal-string arithmetic on the server and
/// sent as decimal strings, so they are exact over their whole range (Lua numbers are
/// doubles, exact only below 2^53). The largest token is `i64::MAX` (2^63 - 1); once the
/// counter reaches it, every grant fails with an error naming the counter, and nothing is
/// granted or written.
/// What they cannot fix: two masters that both grant during a network partition (the
/// resource still sees two increasing streams; only the later-seen lower token is refused).
///
/// On Redis Sentinel a token also carries a *generation*, the config epoch of the master that
/// issued it, which rises with every failover: the token's value is
/// `generation × 2^64 + sequence`, so every token of a promoted master is above every token of
/// the master it replaced, whatever the two servers' clocks say — and a grant made by an
/// isolated old master that still serves a stale client is ordered below the new master's.
/// On one server and on Cluster the generation is 0 and the value is the sequence. One
/// number either way: compare tokens as integers (`u128`), print them in decimal.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct FencingToken(pub u128);

impl FencingToken {
    /// The token's value: `generation × 2^64 + sequence`.
    pub fn get(self) -> u128 {
        self.0
    }

    /// The generation: the issuing master's Sentinel config epoch, 0 elsewhere.
    pub fn generation(self) -> u64 {
        (self.0 >> 64) as u64
    }

    /// The sequence within the generation (`max(last + 1, server µs)`).
    pub fn sequence(self) -> u64 {
        self.0 as u64
    }
}

impl fmt::Display for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Who was granted a plain or fair lock, as the grant recorded it in the lock hash's holder
/// field ([`layout::HOLDER_FIELD`](crate::layout::HOLDER_FIELD), value
/// `owner=<owner>;app=<app>;host=<host>;pid=<pid>;since=<ms>`). Reported by [`Lock::status`]
/// as [`LockStatus::holder`].
///
/// The record is written with the grant to a new holder and stays, unchanged, through its
/// re-entries and partial releases until the last release deletes the lock; a hold taken
/// over with [`Lock::adopt`] keeps the record of the process that was granted it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct HolderInfo {
    /// The owner that was granted the lock: its hash field `<client-uuid>:<owner-id>`.
    pub owner: String,
    /// The granting client's application name
    /// ([`ClientBuilder::app_name`](crate::ClientBuilder::app_name)).
    pub app: String,
    /// The host name of the granting process's machine (characters outside
    /// `[A-Za-z0-9._-]` replaced by `_`).
    pub host: String,
    /// The granting process's id.
    pub pid: u32,
    /// When the lock was granted, by the server's clock (`TIME`, millisecond precision).
    pub since: SystemTime,
}

impl HolderInfo {
    /// Parse a holder field's value: `;`-separated `key=value` pairs, `owner` first. Keys it
    /// does not know are ignored (a later version may record more). `None` when `owner`,
    /// `app`, `host`, `pid` or `since` is missing, or `pid` is not a `u32` or `since` not a
    /// whole number of milliseconds since the Unix epoch.
    ///
    /// The owner runs up to the first `;` followed by a lowercase `key=` (owners minted by
    /// distlock and Redisson never contain `;`).
    ///
    /// # Examples
    /// ```
    /// use std::time::{Duration, UNIX_EPOCH};
    ///
    /// let h = distlock::HolderInfo::parse(
    ///     "owner=6f1c…:7;app=billing;host=web-1;pid=4242;since=1700000000123",
    /// )
    /// .unwrap();
    /// assert_eq!((h.owner.as_str(), h.app.as_str(), h.pid), ("6f1c…:7", "billing", 4242));
    /// assert_eq!(h.since, UNIX_EPOCH + Duration::from_millis(1_700_000_000_123));
    /// ```
    pub fn parse(value: &str) -> Option<HolderInfo> {
        let rest = value.strip_prefix("owner=")?;
        let end = rest
            .match_indices(';')
            .map(|(i, _)| i)
            .find(|&i| starts_with_key(&rest[i + 1..]))
            .unwrap_or(rest.len());
        HolderInfo::parse_rest(&rest[..end], &rest[end..])
    }

    /// [`HolderInfo::parse`] for a value known to start with `owner=<owner>;` (the lock's
    /// one holder, so an owner with `;` in it is read whole); falls back to
    /// [`HolderInfo::parse`] otherwise.
    pub(crate) fn parse_for(value: &str, owners: &[(String, u64)]) -> Option<HolderInfo> {
        let rest = value.strip_prefix("owner=")?;
        for (owner, _) in owners {
            if let Some(after) = rest.strip_prefix(owner.as_str()) {
                if after.starts_with(';') || after.is_empty() {
                    return HolderInfo::parse_rest(owner, after);
                }
            }
        }
        HolderInfo::parse(value)
    }

    /// The pairs after the owner (`;app=…;host=…`, each led by `;`).
    fn parse_rest(owner: &str, pairs: &str) -> Option<HolderInfo> {
        let (mut app, mut host, mut pid, mut since) = (None, None, None, None);
        for pair in pairs.split(';').filter(|p| !p.is_empty()) {
            let Some((key, value)) = pair.split_once('=') else {
                continue;
            };
            match key {
                "app" => app = Some(value),
                "host" => host = Some(value),
                "pid" => pid = Some(value.parse::<u32>().ok()?),
                "since" => since = Some(value.parse::<u64>().ok()?),
                _ => {}
            }
        }
        Some(HolderInfo {
            owner: owner.to_string(),
            app: app?.to_string(),
            host: host?.to_string(),
            pid: pid?,
            since: SystemTime::UNIX_EPOCH.checked_add(Duration::from_millis(since?))?,
        })
    }
}

/// Whether `s` starts with `<key>=`, a key being lowercase ASCII letters, digits, `_` or
/// `-`, led by a letter.
fn starts_with_key(s: &str) -> bool {
    let Some((key, _)) = s.split_once('=') else {
        return false;
    };
    key.starts_with(|c: char| c.is_ascii_lowercase())
        && key
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

/// What [`Lock::status`] reports.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockStatus {
    /// The lock's name.
    pub name: String,
    /// The lock's Redis key.
    pub key: String,
    /// Owner fields (`<client-uuid>:<owner-id>`) with their hold counts; empty when free.
    pub holders: Vec<(String, u64)>,
    /// Time left on the lease; `None` when free or without TTL.
    pub ttl: Option<Duration>,
    /// The current holder's fencing token, when the holder is a distlock owner.
    pub fencing_token: Option<FencingToken>,
    /// The last token issued by the fencing counter this lock draws from
    /// ([`Lock::fencing_counter_key`]: one per cluster hash slot, shared by the names in that
    /// slot, so an upper bound of this lock's last token). Before the slot's first grant: the
    /// floor its counter will start above (the legacy server-wide counter as read at
    /// connect, 0 when there was none).
    pub fencing_counter: u128,
    /// Connections subscribed to the wake channel (`PUBSUB NUMSUB`): one per waiting client
    /// (per waiter for a fair lock, whose waiters have channels of their own).
    pub subscribers: u64,
    /// Read-write locks: `"read"` or `"write"` while held.
    pub mode: Option<String>,
    /// Fair locks: the waiting owners, first in line first.
    pub queue: Vec<String>,
    /// Read-write locks: writers waiting (new readers hold back while there are any).
    pub waiting_writers: u64,
    /// Plain and fair locks: who was granted the lock — owner, application, host, process
    /// id and since when — as the grant recorded it. `None` when the lock is free, when its
    /// holder did not record it (a Redisson client; a distlock client older than this
    /// field) or the record cannot be parsed, and always for read-write locks: Redisson's
    /// `RReadWriteLock` unlock scripts decide whether to delete the hash by its number of
    /// fields (`HLEN`), so distlock adds no field to a read-write lock's hash.
    pub holder: Option<HolderInfo>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_millis(ms)
    }

    #[test]
    fn holder_records_parse() {
        let h = HolderInfo::parse("owner=u-1:7;app=billing;host=web-1;pid=42;since=1700000000123")
            .unwrap();
        assert_eq!(
            h,
            HolderInfo {
                owner: "u-1:7".into(),
                app: "billing".into(),
                host: "web-1".into(),
                pid: 42,
                since: at(1_700_000_000_123),
            }
        );
        // Unknown keys, in any place after the owner, are ignored.
        let h = HolderInfo::parse("owner=u:1;zone=eu-1;app=a;host=h;pid=1;since=5;extra=x=y;flag")
            .unwrap();
        assert_eq!((h.owner.as_str(), h.app.as_str(), h.pid), ("u:1", "a", 1));
        assert_eq!(h.since, at(5));
    }

    #[test]
    fn unparsable_holder_records_are_none() {
        for bad in [
            "",
            "app=a;host=h;pid=1;since=5",
            "owner=u:1;host=h;pid=1;since=5",
            "owner=u:1;app=a;pid=1;since=5",
            "owner=u:1;app=a;host=h;since=5",
            "owner=u:1;app=a;host=h;pid=1",
            "owner=u:1;app=a;host=h;pid=-1;since=5",
            "owner=u:1;app=a;host=h;pid=4294967296;since=5",
            "owner=u:1;app=a;host=h;pid=1;since=soon",
            "owner=u:1;app=a;host=h;pid=1;since=1.5",
        ] {
            assert_eq!(HolderInfo::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn an_owner_with_semicolons_is_read_whole_when_known() {
        let v = "owner=a;b=c:1;app=x;host=h;pid=2;since=3";
        // Alone, the owner ends before `b=`.
        assert_eq!(HolderInfo::parse(v).unwrap().owner, "a");
        let holders = vec![("a;b=c:1".to_string(), 1)];
        let h = HolderInfo::parse_for(v, &holders).unwrap();
        assert_eq!((h.owner.as_str(), h.app.as_str()), ("a;b=c:1", "x"));
        // An owner that is not the holder: as parse.
        let others = vec![("z:1".to_string(), 1)];
        assert_eq!(HolderInfo::parse_for(v, &others).unwrap().owner, "a");
    }

    #[test]
    fn reserved_fields_are_not_owners() {
        assert!(Owner::parse(TOKEN_FIELD).is_err());
        assert!(Owner::parse(HOLDER_FIELD).is_err());
        assert!(Owner::parse("distlock:holders").is_ok());
    }
}
