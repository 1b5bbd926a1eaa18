//! "Who holds it": each client names its connections (`CLIENT SETNAME
//! distlock:<app>:<host>:<pid>`, library name `distlock`).

use std::collections::HashMap;
use std::time::Duration;

use distlock::{Client, ErrorKind};

use crate::util::*;

/// This machine's host name as distlock reports it: characters outside `[A-Za-z0-9._-]`
/// replaced by `_`.
fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .expect("read the host name")
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

async fn client_named(server: &RedisServer, app: &str) -> Client {
    Client::builder()
        .url(server.url())
        .app_name(app)
        .build()
        .await
        .expect("connect to test server")
}

/// `CLIENT LIST` as one map per connection.
fn client_list(server: &RedisServer) -> Vec<HashMap<String, String>> {
    let text: String = cmd(server, &["CLIENT", "LIST"]);
    text.lines()
        .map(|line| {
            line.split(' ')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

/// The connections named `name`: (subscribed to something, the whole entry).
fn named(server: &RedisServer, name: &str) -> Vec<(bool, HashMap<String, String>)> {
    client_list(server)
        .into_iter()
        .filter(|c| c.get("name").map(String::as_str) == Some(name))
        .map(|c| {
            let subscribed = c.get("sub").is_some_and(|n| n != "0");
            (subscribed, c)
        })
        .collect()
}

/// Whether the server reports library names in `CLIENT LIST` (Redis 7.2 and later).
fn reports_lib_name(server: &RedisServer) -> bool {
    let info: String = cmd(server, &["INFO", "server"]);
    let version = info
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .unwrap_or("0")
        .trim()
        .to_string();
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= (7, 2)
}

/// Wait (at most 10 s) until `server` shows a command connection (not subscribed) and a
/// subscription connection (subscribed, with a waiter waiting) both named `name`; returns
/// the two entries.
async fn both_named(
    server: &RedisServer,
    name: &str,
) -> (HashMap<String, String>, HashMap<String, String>) {
    let found = eventually(Duration::from_secs(10), || {
        let conns = named(server, name);
        conns.iter().any(|(s, _)| *s) && conns.iter().any(|(s, _)| !*s)
    })
    .await;
    let conns = named(server, name);
    assert!(
        found,
        "no command and subscription connection named {name}: {:?}",
        client_list(server)
    );
    let sub = conns.iter().find(|(s, _)| *s).unwrap().1.clone();
    let command = conns.iter().find(|(s, _)| !*s).unwrap().1.clone();
    (command, sub)
}

/// The client's connections are named `distlock:<app>:<host>:<pid>` — the command
/// connection and the subscription connection — and report the library `distlock` (Redis
/// 7.2+). After a server restart both are named again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_are_named_and_named_again_after_a_restart() {
    let mut server = RedisServer::start();
    let client = client_named(&server, "conn-names").await;
    let name = format!("distlock:conn-names:{}:{}", host(), std::process::id());
    assert_eq!(client.connection_name(), name);
    assert_eq!(client.app_name(), "conn-names");

    // A waiter on a lock another client holds keeps a subscription open.
    let other = client_named(&server, "holder-app").await;
    let held = other.lock("busy").try_acquire().await.unwrap().unwrap();
    let waiter = {
        let client = client.clone();
        tokio::spawn(async move {
            client
                .lock("busy")
                .try_acquire_for(Duration::from_secs(60))
                .await
        })
    };
    let (command, sub) = both_named(&server, &name).await;
    if reports_lib_name(&server) {
        for c in [&command, &sub] {
            assert_eq!(c.get("lib-name").map(String::as_str), Some("distlock"));
            assert_eq!(
                c.get("lib-ver").map(String::as_str),
                Some(env!("CARGO_PKG_VERSION"))
            );
        }
    } else {
        eprintln!("redis-server below 7.2: lib-name not reported, not checked");
    }
    // The other client's connections carry its own name.
    let other_name = format!("distlock:holder-app:{}:{}", host(), std::process::id());
    assert!(!named(&server, &other_name).is_empty());

    // Restart: every connection breaks; the hub reconnects, names its new connection and
    // has the command connection named again. A new holder keeps the waiter waiting.
    let _ = held.forget();
    server.restart();
    let held = loop {
        // The other client reconnects too; its first requests may fail.
        match other.lock("busy").try_acquire().await {
            Ok(Some(g)) => break g,
            Ok(None) => panic!("the restarted server has no lock"),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    let (command, sub) = both_named(&server, &name).await;
    assert_ne!(command.get("id"), sub.get("id"));
    held.release().await.unwrap();
    let granted = waiter.await.unwrap().unwrap();
    granted
        .expect("the waiter was granted")
        .release()
        .await
        .unwrap();
}

/// A user whose ACL denies `CLIENT SETNAME` connects and locks all the same; its
/// connections stay unnamed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_without_client_rights_connects_unnamed() {
    let server = RedisServer::start();
    let _: () = cmd(
        &server,
        &[
            "ACL", "SETUSER", "noclient", "reset", "on", ">pw", "~*", "&*", "+@all", "-client",
        ],
    );
    let client = Client::builder()
        .url(format!("redis://noclient:pw@127.0.0.1:{}/", server.port()))
        .app_name("no-names")
        .build()
        .await
        .expect("connects without CLIENT rights");
    let guard = client.lock("unnamed").try_acquire().await.unwrap().unwrap();
    guard.release().await.unwrap();
    assert!(named(&server, client.connection_name()).is_empty());
    let users: Vec<String> = client_list(&server)
        .into_iter()
        .filter_map(|c| c.get("user").cloned())
        .collect();
    assert!(
        users.iter().any(|u| u == "noclient"),
        "the client is connected: {users:?}"
    );
}

/// A bad app name is a configuration error, found before anything is connected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_app_name_is_refused_before_connecting() {
    let server = RedisServer::start();
    let accepted = || -> u64 {
        let info: String = cmd(&server, &["INFO", "stats"]);
        info.lines()
            .find_map(|l| l.strip_prefix("total_connections_received:"))
            .expect("total_connections_received")
            .trim()
            .parse()
            .unwrap()
    };
    let accepted_before = accepted();
    for bad in ["", "has space", "colon:in", "ünï", &"x".repeat(65)] {
        let err = Client::builder()
            .url(server.url())
            .app_name(bad)
            .build()
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Config, "{bad:?}: {err}");
        assert!(err.to_string().contains("app name"), "{err}");
    }
    // No connection but the test's own (one per INFO) reached the server.
    assert_eq!(
        accepted(),
        accepted_before + 1,
        "a refused client connected"
    );
    // The name is checked before the server is even looked for.
    let err = Client::builder()
        .url("redis://127.0.0.1:1/")
        .app_name("bad name")
        .build()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Config, "{err}");
    // A good one is taken as given; the default is the executable's name.
    let c = client_named(&server, "a-Z_0.9").await;
    assert_eq!(c.app_name(), "a-Z_0.9");
    let d = client_for(&server).await;
    let exe = std::env::current_exe().unwrap();
    let stem = exe.file_stem().unwrap().to_string_lossy();
    assert_eq!(d.app_name(), stem);
}
