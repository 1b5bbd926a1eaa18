//! How distlock's connections introduce themselves to the server, so that `CLIENT LIST`
//! says which process owns each one:
//!
//! - every `redis::Client` distlock builds carries the library name `distlock` and the crate
//!   version, which redis-rs sends as `CLIENT SETINFO LIB-NAME` / `LIB-VER` on every connect
//!   and reconnect (Redis 7.2+; older servers refuse it and redis-rs ignores the refusal);
//! - the connections distlock opens itself are named `distlock:<app>:<host>:<pid>` with
//!   `CLIENT SETNAME` ([`set_name`]), which redis-rs cannot send on its own: the command
//!   connection at connect and after each reconnection of the subscription hub (a restart or
//!   a failover drops both), the subscription connections at each (re)connect, and the
//!   connections set aside for grants confirmed by `WAIT`.
//!
//! A failed `CLIENT SETNAME` (an ACL user without `+client|setname`) is logged at debug level
//! and otherwise ignored: a name is a convenience, never a reason to fail.
//!
//! The gaps: redis-rs reconnects its command connection by itself, without the name, so a
//! command connection that is dropped alone — the server's idle `timeout` (subscribed
//! connections are exempt), `CLIENT KILL`, a reset of that one socket — comes back unnamed
//! until the subscription hub next reconnects; connections for one redirected command
//! (`ASK`) are not named. On Redis Cluster, redis-rs's cluster client opens its node connections itself.
//! The name is sent through it once at connect (redis-rs routes `CLIENT SETNAME` to every node
//! it knows then) and again after each reconnection of the subscription hub, but a node
//! connection it opens in between (a node restarted, a failover, a new node) stays unnamed;
//! the cluster client also does not pass distlock's library name on, so its node connections
//! report redis-rs's (`lib-name=redis-rs`).

use redis::aio::ConnectionLike;
use redis::{ConnectionInfo, IntoConnectionInfo};

/// The library name sent with `CLIENT SETINFO LIB-NAME`.
pub(crate) const LIB_NAME: &str = "distlock";
/// The library version sent with `CLIENT SETINFO LIB-VER`: this crate's.
pub(crate) const LIB_VER: &str = env!("CARGO_PKG_VERSION");

/// `info` with distlock's library name and version ([`LIB_NAME`], [`LIB_VER`]).
pub(crate) fn with_lib_name(info: ConnectionInfo) -> ConnectionInfo {
    let redis = info
        .redis_settings()
        .clone()
        .set_lib_name(LIB_NAME, LIB_VER);
    info.set_redis_settings(redis)
}

/// A `redis::Client` for `info` (a URL or connection settings) whose connections report
/// distlock's library name.
pub(crate) fn client(info: impl IntoConnectionInfo) -> redis::RedisResult<redis::Client> {
    client_with_ca(info, None)
}

/// As [`client`], trusting only the CA certificates `ca` (PEM) for a TLS address
/// ([`ClientBuilder::tls_ca_cert`](crate::ClientBuilder::tls_ca_cert)); `None`, or a plain
/// TCP address, is [`client`]. Clients derived from this one's connection info keep the CA.
pub(crate) fn client_with_ca(
    info: impl IntoConnectionInfo,
    ca: Option<&[u8]>,
) -> redis::RedisResult<redis::Client> {
    let info = with_lib_name(info.into_connection_info()?);
    #[cfg(feature = "tls")]
    if let (Some(ca), redis::ConnectionAddr::TcpTls { .. }) = (ca, info.addr()) {
        return redis::Client::build_with_tls(info, tls_certificates(ca));
    }
    #[cfg(not(feature = "tls"))]
    let _ = ca;
    redis::Client::open(info)
}

/// redis-rs's TLS settings for a private CA (no client certificate).
#[cfg(feature = "tls")]
pub(crate) fn tls_certificates(ca: &[u8]) -> redis::TlsCertificates {
    redis::TlsCertificates {
        client_tls: None,
        root_cert: Some(ca.to_vec()),
    }
}

/// `host` with every character outside `[A-Za-z0-9._-]` replaced by `_` (`CLIENT SETNAME`
/// refuses spaces; the holder metadata separates its parts with `;` and `=`); `unknown` when
/// empty.
pub(crate) fn sanitize_host(host: &str) -> String {
    if host.is_empty() {
        return "unknown".to_string();
    }
    host.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// This machine's host name, sanitized ([`sanitize_host`]).
pub(crate) fn host_name() -> String {
    sanitize_host(&gethostname::gethostname().to_string_lossy())
}

/// The connection name of a client: `distlock:<app>:<host>:<pid>`.
pub(crate) fn connection_name(app: &str, host: &str, pid: u32) -> String {
    format!("distlock:{app}:{host}:{pid}")
}

/// Send `CLIENT SETNAME <name>` on `conn`; a refusal or a failure is logged at debug level
/// and otherwise ignored.
pub(crate) async fn set_name<C: ConnectionLike + Send>(conn: &mut C, name: &str) {
    let r: redis::RedisResult<()> = redis::cmd("CLIENT")
        .arg("SETNAME")
        .arg(name)
        .query_async(conn)
        .await;
    if let Err(e) = r {
        tracing::debug!(
            name,
            error = format_args!("{e:#}"),
            "CLIENT SETNAME failed; the connection stays unnamed"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_are_sanitized() {
        assert_eq!(sanitize_host("web-1.example.com"), "web-1.example.com");
        assert_eq!(sanitize_host("My Laptop"), "My_Laptop");
        assert_eq!(sanitize_host("a;b=c:d"), "a_b_c_d");
        assert_eq!(sanitize_host("é"), "_");
        assert_eq!(sanitize_host(""), "unknown");
        assert_eq!(
            connection_name("orders", "web-1", 42),
            "distlock:orders:web-1:42"
        );
    }

    #[test]
    fn clients_carry_the_lib_name() {
        let c = client("redis://127.0.0.1:6379/2").unwrap();
        let info = c.get_connection_info().redis_settings();
        assert_eq!(info.lib_name(), Some("distlock"));
        assert_eq!(info.lib_ver(), Some(env!("CARGO_PKG_VERSION")));
        assert!(!info.skip_set_lib_name());
        assert_eq!(info.db(), 2);
    }
}
