//! Lost-lease notices: a force unlock tells each holder's client at once, instead of leaving
//! it to find out at its next renewal (a third of the lease later).
//!
//! Every client listens on its own notice channel ([`keys::client_notice_channel`],
//! subscribed for the client's life on the subscription connection it already keeps). The
//! force-unlock scripts answer the owner fields they deleted (`<client-id>:<owner>[:write]`);
//! the client that force-unlocked then publishes `l;<field length>;<field>;<key>` (the
//! length in bytes: an owner may contain `;`) on each holder client's
//! channel, and a client that hears one fires the lost signal of its lease on that key and
//! field (the watchdog's lease states). A notice that reaches nobody (the holder's
//! subscription is down, a deleting client without rights on the channel) changes nothing:
//! the holder still finds out at its next renewal. A Redisson client's `forceUnlock` and a
//! key deleted by hand publish no notice.

use crate::conn::Backend;
use crate::keys;
use crate::scripts::Publish;

/// The notice payload for the lease of `field` on `key`.
fn payload(field: &str, key: &str) -> String {
    format!("l;{};{field};{key}", field.len())
}

/// The `(field, key)` of a notice payload; `None` for anything else.
pub(crate) fn parse(payload: &[u8]) -> Option<(&str, &str)> {
    let text = std::str::from_utf8(payload).ok()?;
    let (len, rest) = text.strip_prefix("l;")?.split_once(';')?;
    let len: usize = len.parse().ok()?;
    let field = rest.get(..len)?;
    let key = rest.get(len..)?.strip_prefix(';')?;
    (!field.is_empty() && !key.is_empty()).then_some((field, key))
}

/// Tell the clients of `fields` (owner fields deleted from `key`) that their holds are gone:
/// one publish per holder, the way `backend` publishes (classic, sharded or both). Failures
/// are logged at DEBUG and otherwise ignored (the holders then learn at their next renewal).
pub(crate) async fn tell_holders(backend: &Backend, key: &str, fields: &[String]) {
    let notices = fields.iter().filter_map(|field| {
        let (client, _) = field.split_once(':')?;
        Some((keys::client_notice_channel(client), payload(field, key)))
    });
    publish(backend, notices.collect()).await;
}

/// Tell the holder of a job lock (`key`) that a force unlock deleted its `value`: on the
/// job's notice channel, where the guard that wrote `value` listens. As [`tell_holders`].
pub(crate) async fn tell_job_holder(backend: &Backend, key: &str, value: &str) {
    publish(
        backend,
        vec![(keys::job_notice_channel(key), value.to_string())],
    )
    .await;
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
    use super::{parse, payload};

    #[test]
    fn notices_parse_back_whatever_the_key_holds() {
        let p = payload("c1:7;x:write", "locks;{a}:b");
        assert_eq!(p, "l;12;c1:7;x:write;locks;{a}:b");
        assert_eq!(parse(p.as_bytes()), Some(("c1:7;x:write", "locks;{a}:b")));
        for bad in [
            "", "l;", "l;1;f;", "l;0;;k", "h;1;f;k", "l;1;f", "l;9;f;k", "l;x;f;k",
        ] {
            assert_eq!(parse(bad.as_bytes()), None, "{bad:?}");
        }
    }
}
