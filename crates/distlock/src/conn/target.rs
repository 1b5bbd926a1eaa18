//! [`Target`]: where a client connects, parsed from its URL; [`Backend::connect`] connects.

use super::backend::Backend;
use super::deployment::{Connection, Deployment, Route};
use super::naming;
use super::pubsub::subscriber::Subscriber;
use super::redact::{looks_like_address, redact_url};
use super::standalone::Server;
use super::url::insecure_as_fragment;
use super::ConnectSettings;
use super::{cluster, sentinel};
use crate::error::{Error, ErrorKind, Result};
use crate::scripts::functions::{self, Library};
use crate::scripts::{Publish, Via};
use crate::ScriptCalls;

/// Where a client connects: a standalone server, or a master behind Redis Sentinel.
#[derive(Debug)]
pub(crate) enum Target {
    /// `redis://`, `rediss://`, `unix://`.
    Standalone(redis::Client),
    /// `redis-sentinel://`, `rediss-sentinel://`.
    Sentinel(sentinel::SentinelUrl),
    /// `redis-cluster://`, `rediss-cluster://`.
    Cluster(cluster::ClusterUrl),
}

impl Target {
    /// Parse a server URL; `sentinel_auth` (`user:password` or `:password`) is for the
    /// sentinels of a Sentinel URL. Errors never quote the URL (it may hold a password).
    pub(crate) fn parse(
        url: &str,
        sentinel_auth: Option<&str>,
        tls_ca: Option<&[u8]>,
    ) -> Result<Target> {
        if !url.contains("://") {
            // Text without a scheme may be a password put where the URL goes: quoted only
            // when it looks like an address.
            let shown = if looks_like_address(url) {
                format!("server URL {url:?} has no scheme: use redis://{url}")
            } else {
                "the server URL has no scheme (it is not shown: it may be a password put in \
                 the wrong place)"
                    .to_string()
            };
            return Err(Error::config(format!(
                "{shown}; a URL is redis://HOST[:PORT][/DB], rediss://… for TLS, \
                 redis-sentinel://…, redis-cluster://… or unix:///PATH"
            )));
        }
        let redacted = redact_url(url);
        if cluster::is_cluster_url(url) {
            return cluster::ClusterUrl::parse(url)
                .map(Target::Cluster)
                .map_err(|e| Error::config(format!("cannot use server URL {redacted}: {e}")));
        }
        if sentinel::is_sentinel_url(url) {
            return sentinel::SentinelUrl::parse(url, sentinel_auth)
                .map(Target::Sentinel)
                .map_err(|e| Error::config(format!("cannot use server URL {redacted}: {e}")));
        }
        check_userinfo(url, &redacted)?;
        naming::client_with_ca(insecure_as_fragment(url).as_ref(), tls_ca)
            .map(Target::Standalone)
            .map_err(|e| {
                // The driver's message may quote the URL: report only its category, or what
                // the URL parser says is wrong (never quoting the URL).
                let why = match ::url::Url::parse(url) {
                    Err(::url::ParseError::InvalidPort) => {
                        "the port is not a number from 0 to 65535".to_string()
                    }
                    Err(::url::ParseError::EmptyHost) => "the URL names no host".to_string(),
                    Err(
                        ::url::ParseError::InvalidDomainCharacter
                        | ::url::ParseError::InvalidIpv4Address
                        | ::url::ParseError::InvalidIpv6Address
                        | ::url::ParseError::IdnaError,
                    ) => "the host is not a valid name or IP address".to_string(),
                    _ => e.category().to_string(),
                };
                Error::config(format!("cannot use server URL {redacted}: {why}"))
            })
    }
}

/// Refuse a one-server URL whose user information (up to the last `@`) holds `#`, `?` or
/// `/` unencoded: the URL parser ends the server part there, so the password would be cut and
/// the rest taken for a host (a DNS error) while the redacted URL looks right.
fn check_userinfo(url: &str, redacted: &str) -> Result<()> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Ok(());
    };
    if scheme.ends_with("unix") {
        return Ok(());
    }
    let Some((info, _)) = rest.rsplit_once('@') else {
        return Ok(());
    };
    if let Some(c) = info.chars().find(|c| matches!(c, '#' | '?' | '/')) {
        let part = if info.contains(':') {
            "password"
        } else {
            "user information"
        };
        return Err(Error::config(format!(
            "cannot use server URL {redacted}: the URL's {part} holds an unencoded `{c}`, which \
             ends the URL's server part"
        ))
        .with_fix(crate::error::Fix::EncodePassword));
    }
    Ok(())
}

impl Backend {
    /// Connect and authenticate; fails fast on an unreachable server or a refused password.
    /// Returns the backend and where the subscription hub connects.
    pub(crate) async fn connect(
        target: Target,
        settings: &ConnectSettings,
        redacted_url: &str,
    ) -> Result<(Backend, Subscriber)> {
        // One budget for the whole connect (TCP, TLS, AUTH, the first PING): redis-rs's
        // manager retries a failed first connection on its own, which must not stretch it.
        let context = format!("connect to {redacted_url}");
        let connect = async {
            let (deployment, publish) = match target {
                Target::Standalone(client) => {
                    let server = Server::connect(client, settings)
                        .await
                        .map_err(|e| Error::from_redis(&context, e))?;
                    (Deployment::Standalone(server), Publish::Classic)
                }
                Target::Sentinel(config) => {
                    let master = sentinel::Master::connect(config, settings).await.map_err(
                        |(failure, e)| {
                            let kind = match failure {
                                sentinel::Failure::Unavailable => ErrorKind::Connection,
                                sentinel::Failure::Auth => ErrorKind::Auth,
                                sentinel::Failure::UnknownMaster => ErrorKind::Config,
                            };
                            Error::new(kind, format!("{context}: {e}"))
                        },
                    )?;
                    (Deployment::Sentinel(master), Publish::Classic)
                }
                Target::Cluster(config) => {
                    let (mut conn, nodes) = cluster::open(&config, settings)
                        .await
                        .map_err(|e| Error::from_redis(&context, e))?;
                    let publish = cluster::publish_mode(&mut conn, settings.pubsub)
                        .await
                        .map_err(|e| Error::from_redis(&context, e))?
                        .map_err(|why| {
                            Error::new(ErrorKind::Config, format!("{context}: {why}"))
                        })?;
                    (Deployment::Cluster { conn, nodes }, publish)
                }
            };
            let cluster = matches!(deployment, Deployment::Cluster { .. });
            let mut backend = Backend {
                conn: Connection {
                    deployment,
                    route: Route::Shared,
                },
                via: Via {
                    publish,
                    functions: false,
                },
                calls: ScriptCalls::Evalsha {
                    reason: "not chosen yet",
                },
            };
            backend
                .query::<String>(&context, &redis::cmd("PING"))
                .await?;
            backend.calls = if !settings.functions {
                ScriptCalls::Evalsha {
                    reason: "Redis Functions turned off (ClientBuilder::redis_functions)",
                }
            } else if cluster {
                ScriptCalls::Evalsha {
                    reason: "Redis Cluster: a node that lost the library would be reloaded through every master, so scripts run by EVALSHA, which each node caches on first use",
                }
            } else {
                load_functions(&backend, &context).await?
            };
            backend.via.functions = matches!(backend.calls, ScriptCalls::Functions { .. });
            tracing::debug!(calls = ?backend.calls, "{context}: how scripts are called");
            let subscriber = Subscriber::new(backend.clone(), settings.client_name.clone());
            Ok::<_, Error>((backend, subscriber))
        };
        match tokio::time::timeout(settings.connect_timeout, connect).await {
            Ok(r) => r,
            Err(_) => Err(Error::new(
                ErrorKind::Connection,
                format!(
                    "{context}: no answer within the connect timeout ({:?})",
                    settings.connect_timeout
                ),
            )),
        }
    }
}

/// Load the client's library of functions (`FUNCTION LOAD`; one loaded already by another
/// client of this version is used as it is) and call its probe (`FCALL`): how the scripts
/// are called, `EVALSHA` where the server has no functions (before Redis 7), the user may
/// not load or call them (`NOPERM`) or the load fails otherwise (a read-only replica, a full
/// server). Only a connection failure is an error.
async fn load_functions(backend: &Backend, context: &str) -> Result<ScriptCalls> {
    let library = Library::of(backend.via.publish);
    let answer = |cmd: redis::Cmd| async move {
        backend
            .send(context, super::Resend::Few, |mut conn| {
                let cmd = cmd.clone();
                async move {
                    Ok::<_, redis::RedisError>(cmd.query_async::<redis::Value>(&mut conn).await)
                }
            })
            .await
            .map(|(v, _)| v)
    };
    let refused = |e: &redis::RedisError| {
        let reason = if functions::unsupported(e) {
            "the server has no Redis Functions (before Redis 7)"
        } else if e.code() == Some("NOPERM") {
            "the ACL user may not run FUNCTION LOAD or FCALL"
        } else {
            tracing::info!(error = %e, "{context}: loading distlock's Redis Functions failed; scripts run by EVALSHA");
            "FUNCTION LOAD or FCALL failed"
        };
        ScriptCalls::Evalsha { reason }
    };
    let mut load = redis::cmd("FUNCTION");
    load.arg("LOAD").arg(library.code());
    match answer(load).await? {
        Ok(_) => {}
        Err(e) if functions::already_loaded(&e) => {}
        Err(e) => return Ok(refused(&e)),
    }
    let mut probe = redis::cmd("FCALL");
    probe.arg(library.probe()).arg(0);
    Ok(match answer(probe).await? {
        Ok(_) => ScriptCalls::Functions {
            library: library.name(),
        },
        Err(e) => refused(&e),
    })
}
