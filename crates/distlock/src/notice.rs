//! Lost-lease notices: a force unlock tells each holder's client at once, instead of leaving
//! it to find out at its next renewal (a third of the lease later).
//!
//! Every client listens on its own notice channel ([`keys::client_notice_channel`],
//! subscribed for the client's life on the subscription connection it already keeps). The
//! force-unlock scripts answer the owner fields they deleted (`<client-id>:<owner>[:write]`);
//! the client that force-unlocked then publishes `l;<field length>;<field>;<key>` (the
//! length in bytes: an owner may contain `;`) on each holder client's
//! channel. A job lock's value names its holder's client (`ADDED:<time>@<host>:<client-id>`),
//! so a job lock's force unlock publishes `j;<value length>;<value>;<key>` there too (and on
//! the job's own channel, [`keys::job_notice_channel`], where older distlock versions' guards
//! listen). A notice is a claim, not proof: any client allowed to `PUBLISH` on the channel
//! can send one. A client that hears one asks the server (`HEXISTS` of the field; a job
//! lock's `GET`, compared with the value the guard wrote) and fires the lost signal of its
//! lease on that key and field (the watchdog's lease states) only when the hold is gone. A
//! notice that reaches nobody (the holder's subscription is down, a deleting client without
//! rights on the channel) changes nothing: the holder still finds out at its next renewal.
//! A Redisson client's `forceUnlock` and a key deleted by hand publish no notice.

use crate::conn::Backend;
use crate::keys;
use crate::scripts::Publish;

/// A lost-lease notice, as [`parse`] reads it from a payload (`S`: `&str`), or owned by the
/// task that checks it with the server (`S`: `String`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Notice<S> {
    /// `l;…`: the hold of owner `field` on the lock `key`.
    Lock { field: S, key: S },
    /// `j;…`: the job lock `key` holding `value`.
    Job { value: S, key: S },
}

impl Notice<&str> {
    /// This notice with its text owned.
    pub(crate) fn to_owned(self) -> Notice<String> {
        match self {
            Notice::Lock { field, key } => Notice::Lock {
                field: field.to_string(),
                key: key.to_string(),
            },
            Notice::Job { value, key } => Notice::Job {
                value: value.to_string(),
                key: key.to_string(),
            },
        }
    }
}

/// The notice payload of kind `tag` (`l` or `j`) for `what` (an owner field or a job value)
/// on `key`.
fn payload(tag: char, what: &str, key: &str) -> String {
    format!("{tag};{};{what};{key}", what.len())
}

/// The notice in a payload; `None` for anything else. The length is decimal digits without a
/// sign or a leading zero, as [`payload`] writes it.
pub(crate) fn parse(payload: &[u8]) -> Option<Notice<&str>> {
    let text = std::str::from_utf8(payload).ok()?;
    let (tag, rest) = text.split_at_checked(2)?;
    let (len, rest) = rest.split_once(';')?;
    if len.is_empty() || len.starts_with('0') || !len.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let len: usize = len.parse().ok()?;
    let what = rest.get(..len)?;
    let key = rest.get(len..)?.strip_prefix(';')?;
    if what.is_empty() || key.is_empty() {
        return None;
    }
    match tag {
        "l;" => Some(Notice::Lock { field: what, key }),
        "j;" => Some(Notice::Job { value: what, key }),
        _ => None,
    }
}

/// Tell the clients of `fields` (owner fields deleted from `key`) that their holds are gone:
/// one publish per holder, the way `backend` publishes (classic, sharded or both). Failures
/// are logged at DEBUG and otherwise ignored (the holders then learn at their next renewal).
pub(crate) async fn tell_holders(backend: &Backend, key: &str, fields: &[String]) {
    let notices = fields.iter().filter_map(|field| {
        let (client, _) = field.split_once(':')?;
        Some((
            keys::client_notice_channel(client),
            payload('l', field, key),
        ))
    });
    publish(backend, notices.collect()).await;
}

/// Tell the holder of a job lock (`key`) that a force unlock deleted its `value`: on the
/// notice channel of the client the value names, where the guard that wrote `value` hears
/// it, and on the job's own channel, where older distlock versions' guards listen. As
/// [`tell_holders`].
pub(crate) async fn tell_job_holder(backend: &Backend, key: &str, value: &str) {
    let mut notices = vec![(keys::job_notice_channel(key), value.to_string())];
    if let Some((_, _, Some(client))) = keys::job_value_parts(value) {
        notices.push((
            keys::client_notice_channel(client),
            payload('j', value, key),
        ));
    }
    publish(backend, notices).await;
}

/// Whether the server says the hold of `field` on `key` is gone (a notice's check before
/// the lost signal fires): the field is absent, or the key holds another type now. `false`
/// when the server cannot say (unreachable): the holder's next renewal finds out then.
pub(crate) async fn lock_hold_gone(backend: &Backend, key: &str, field: &str) -> bool {
    let mut cmd = redis::cmd("HEXISTS");
    cmd.arg(key).arg(field);
    match backend.query::<bool>("lost-lease notice check", &cmd).await {
        Ok(held) => !held,
        Err(e) => wrong_type(&e),
    }
}

/// Whether the server says the job lock `key` no longer holds `value` (a job notice's check
/// before the lost signal fires); `false` when the server cannot say.
pub(crate) async fn job_hold_gone(backend: &Backend, key: &str, value: &str) -> bool {
    match job_value_held(backend, key, value, "job-lock notice check").await {
        Ok(held) => !held,
        Err(e) => wrong_type(&e),
    }
}

/// Whether the job lock `key` still holds `value` (`GET`, compared): the notice's check and
/// the periodic check of a job lock without keep-alive.
///
/// # Errors
/// The server's or the connection's error (`WrongType` when the key holds another type).
pub(crate) async fn job_value_held(
    backend: &Backend,
    key: &str,
    value: &str,
    context: impl std::fmt::Display,
) -> crate::Result<bool> {
    let mut cmd = redis::cmd("GET");
    cmd.arg(key);
    let now: Option<Vec<u8>> = backend.query(context, &cmd).await?;
    Ok(now.as_deref() == Some(value.as_bytes()))
}

/// A `WRONGTYPE` answer: the key holds another type, so no hold of ours is in it.
fn wrong_type(e: &crate::Error) -> bool {
    tracing::debug!(
        error = format_args!("{e:#}"),
        "lost-lease notice check failed"
    );
    e.kind() == crate::ErrorKind::WrongType
}

/// Publish each `(channel, message)` the way `backend` publishes, all at once; failures
/// logged at DEBUG.
async fn publish(backend: &Backend, notices: Vec<(String, String)>) {
    let commands: &[&str] = match backend.publish() {
        Publish::Classic => &["PUBLISH"],
        Publish::Sharded => &["SPUBLISH"],
        Publish::Both => &["PUBLISH", "SPUBLISH"],
    };
    let mut sends = Vec::with_capacity(notices.len() * commands.len());
    for (channel, message) in &notices {
        for command in commands {
            let mut cmd = redis::cmd(command);
            cmd.arg(channel).arg(message);
            sends.push(async move {
                if let Err(e) = backend.query::<i64>(*command, &cmd).await {
                    tracing::debug!(error = format_args!("{e:#}"), "lost-lease notice not sent");
                }
            });
        }
    }
    futures_util::future::join_all(sends).await;
}

#[cfg(test)]
mod tests {
    use super::{parse, payload, Notice};

    #[test]
    fn notices_parse_back_whatever_the_key_holds() {
        let lock = |field, key| Some(Notice::Lock { field, key });
        let p = payload('l', "c1:7;x:write", "locks;{a}:b");
        assert_eq!(p, "l;12;c1:7;x:write;locks;{a}:b");
        assert_eq!(parse(p.as_bytes()), lock("c1:7;x:write", "locks;{a}:b"));
        // A non-ASCII owner: the length counts bytes.
        let p = payload('l', "c1:ünï", "k");
        assert_eq!(p, "l;8;c1:ünï;k");
        assert_eq!(parse(p.as_bytes()), lock("c1:ünï", "k"));
        // A job lock's value, with the `;` and `:` a value may hold.
        let p = payload(
            'j',
            "ADDED:2026-11-29T06:00:51.627Z@vm:c;1",
            "job-lock:default:x",
        );
        assert_eq!(
            parse(p.as_bytes()),
            Some(Notice::Job {
                value: "ADDED:2026-11-29T06:00:51.627Z@vm:c;1",
                key: "job-lock:default:x"
            })
        );
        for bad in [
            "",
            "l;",
            "l;1;f;",
            "l;0;;k",
            "h;1;f;k",
            "j;",
            "j;0;;k",
            "jj;1;f;k",
            "l;1;f",
            "l;9;f;k",
            "l;x;f;k",
            "l;+1;f;k",
            "l;01;f;k",
            "l;-1;f;k",
            "l; 1;f;k",
            "l;6;c1:ünï;k",
        ] {
            assert_eq!(parse(bad.as_bytes()), None, "{bad:?}");
        }
    }
}
