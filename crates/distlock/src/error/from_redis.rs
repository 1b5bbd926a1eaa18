//! How the driver's errors become distlock's: [`Error::from_redis`] classifies them, and the
//! server's own reply is quoted where there is one.

use super::{prefix_at_most, Error, ErrorKind, Fix};
use crate::conn::resend::{classify, Failure};

impl Error {
    /// Classify a driver error (`context` names the operation, e.g. `acquire "orders"`).
    pub(crate) fn from_redis(context: &str, err: redis::RedisError) -> Self {
        use redis::ErrorKind as K;
        let code = err.code().unwrap_or("");
        // The reply's whole text, read once (the checks below look for the server's and the
        // scripts' wordings in it).
        let text = err.to_string();
        let kind = if code == "WRONGTYPE" || text.contains("WRONGTYPE") {
            ErrorKind::WrongType
        } else if code == "NOAUTH" || code == "WRONGPASS" {
            ErrorKind::Auth
        } else if code == "NOPERM"
            || text.contains("NOPERM")
            // Redis < 7.2 words an ACL refusal inside a script this way, Valkey 8 the other.
            || text.contains("The user executing the script can't")
            || text.contains("ACL failure in script")
        {
            ErrorKind::NoPermission
        } else if code == "OOM" || text.contains("OOM command not allowed") {
            ErrorKind::OutOfMemory
        } else if text.contains("distlock-limit: ") {
            // A script's refusal of a call over one of distlock's limits (an owner's read
            // holds): bad input, nothing written.
            ErrorKind::InvalidInput
        } else if text.contains("value is not an integer or out of range") {
            // INCRBY / DECRBY on a string that is no integer count: not distlock's data.
            ErrorKind::WrongType
        } else {
            match err.kind() {
                K::AuthenticationFailed => ErrorKind::Auth,
                K::Io => ErrorKind::Connection,
                K::InvalidClientConfig => ErrorKind::Config,
                K::UnexpectedReturnType | K::Parse => ErrorKind::UnexpectedReply,
                // A connection that broke, timed out or was refused, or a server not serving
                // for now (loading its snapshot, a replica that lost its master, a cluster
                // slot in transit or moved, a master demoted by a failover: READONLY):
                // what the connection layer resends (`conn::resend::classify`).
                _ if classify(&err) != Failure::Final => ErrorKind::Connection,
                _ => ErrorKind::Backend,
            }
        };
        let message = match kind {
            ErrorKind::WrongType => match err.detail().and_then(|d| d.split_once("distlock: ")) {
                // A script's refusal of another kind's data names what the key holds.
                Some((_, what)) => format!(
                    "{context}: {what}; a name serves one kind of primitive, and nothing was \
                     changed"
                ),
                None => format!(
                    "{context}: the key holds a value of another type (another kind of \
                     primitive's, or data that is not distlock's); nothing was changed"
                ),
            },
            ErrorKind::InvalidInput => {
                let why = text
                    .split_once("distlock-limit: ")
                    .map(|(_, w)| {
                        w.split(" script:")
                            .next()
                            .unwrap_or(w)
                            .trim_end_matches('.')
                    })
                    .unwrap_or("over a limit");
                format!("{context}: {why}; release some first (nothing was written)")
            }
            ErrorKind::Auth => match code {
                "NOAUTH" => {
                    return Error::new(
                        kind,
                        format!(
                            "{context}: the server requires a password and none was given (NOAUTH)"
                        ),
                    )
                    .with_fix(Fix::GivePassword)
                    .with_source(err)
                }
                _ => match server_reply(&err) {
                    Some(reply) => {
                        format!("{context}: the server refused the user name or password ({reply})")
                    }
                    None => format!("{context}: the server refused the user name or password"),
                },
            },
            // A server's own refusal (TRYAGAIN, CLUSTERDOWN, MASTERDOWN, READONLY, …) is
            // quoted: it says what to do.
            ErrorKind::Connection => match server_reply(&err) {
                Some(reply) => format!("{context}: the server is not serving it now: {reply}"),
                None => format!("{context}: cannot reach the server"),
            },
            ErrorKind::NoPermission => format!(
                "{context}: the server's ACL denies a command or channel this needs \
                 (see the minimal ACL in distlock's README)"
            ),
            ErrorKind::OutOfMemory => format!(
                "{context}: the server is out of memory (maxmemory reached, noeviction); \
                 nothing was written"
            ),
            ErrorKind::Backend => match server_reply(&err) {
                Some(reply) => format!("{context}: server error: {reply}"),
                None => format!("{context}: {kind}"),
            },
            _ => format!("{context}: {kind}"),
        };
        let fix = match kind {
            ErrorKind::Auth => Some(Fix::CheckCredentials),
            ErrorKind::Connection if untrusted_certificate(&err) => Some(Fix::TrustCa),
            _ => None,
        };
        let message = match fix {
            Some(Fix::TrustCa) => format!(
                "{context}: the server's TLS certificate is signed by a CA that is not trusted"
            ),
            _ => message,
        };
        let e = Error::new(kind, message).with_source(err);
        match fix {
            Some(fix) => e.with_fix(fix),
            None => e,
        }
    }
}

/// Whether `err` is a TLS handshake that failed on a certificate signed by an unknown CA
/// (rustls's `invalid peer certificate: UnknownIssuer`), anywhere in its chain.
fn untrusted_certificate(err: &redis::RedisError) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(c) = cause {
        if c.to_string()
            .contains("invalid peer certificate: UnknownIssuer")
        {
            return true;
        }
        cause = c.source();
    }
    false
}

/// The server's own error reply, `CODE detail` (as `CROSSSLOT Keys in request don't hash to
/// the same slot`), at most 200 bytes; `None` for errors the server did not send. A server's
/// reply never carries the client's password.
pub(crate) fn server_reply(err: &redis::RedisError) -> Option<String> {
    let code = err.code()?;
    let mut reply = match err.detail() {
        Some(detail) => format!("{code} {detail}"),
        None => code.to_string(),
    };
    if reply.len() > 200 {
        let end = prefix_at_most(&reply, 200).len();
        reply.truncate(end);
        reply.push('…');
    }
    Some(reply)
}
