//! `Config`: the client's settings from a file (any serde format; JSON here) or the
//! environment, against a real server.

use std::time::Duration;

use distlock::{Config, ErrorKind};

use crate::util::*;

/// A config file in Redisson's shape (a single server by address, a password apart, a key
/// prefix, durations as humantime writes them) builds a client that locks under that prefix;
/// a file with a misspelt field, or with two deployments, is refused with a message that
/// names the problem.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_file_builds_a_client() {
    let password = "p@ss:w/rd";
    let server = RedisServer::options().password(password).start();
    let text = format!(
        r#"{{
            "single": {{ "address": "127.0.0.1:{}" }},
            "password": "{password}",
            "key_prefix": "cfg:",
            "watchdog_lease": "6s",
            "command_timeout": "2",
            "app_name": "config-test"
        }}"#,
        server.port()
    );
    let config: Config = serde_json::from_str(&text).unwrap();
    let client = config.builder().unwrap().build().await.unwrap();
    assert_eq!(client.watchdog_lease(), Duration::from_secs(6));
    assert_eq!(client.app_name(), "config-test");
    let g = client.lock("x").acquire().await.unwrap();
    assert!(exists(&server, "cfg:x"), "the key prefix applies");
    g.release().await.unwrap();

    let typo =
        serde_json::from_str::<Config>(r#"{ "url": "redis://h/", "pasword": "x" }"#).unwrap_err();
    assert!(typo.to_string().contains("pasword"), "{typo}");
    let two: Config =
        serde_json::from_str(r#"{ "url": "redis://h/", "cluster": { "nodes": ["h:7000"] } }"#)
            .unwrap();
    let e = two.builder().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Config);
    assert!(e.to_string().contains("more than one deployment"), "{e}");
}

/// A service's own `redis::Client` (with a password and a database in its settings) serves
/// distlock's connections: locks, wake-ups and the key in that database; the application's
/// connection is untouched; a URL as well is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_applications_redis_client_is_accepted() {
    let server = RedisServer::options().password("app-secret").start();
    let url = format!("redis://:app-secret@127.0.0.1:{}/3", server.port());
    let app = redis::Client::open(url.as_str()).unwrap();
    let mut app_con = app.get_multiplexed_async_connection().await.unwrap();
    let client = distlock::Client::builder()
        .redis_client(app.clone())
        .build()
        .await
        .unwrap();
    assert!(
        !client.redacted_url().contains("app-secret"),
        "{}",
        client.redacted_url()
    );
    let lock = client.lock("byo");
    let g = lock.acquire().await.unwrap();
    let in_db3: bool = redis::cmd("EXISTS")
        .arg("byo")
        .query_async(&mut app_con)
        .await
        .unwrap();
    assert!(in_db3, "the lock is in the client's database");
    // A waiter is woken through distlock's own subscription on that server.
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.acquire().await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    g.release().await.unwrap();
    let g2 = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the waiter was woken")
        .unwrap()
        .unwrap();
    g2.release().await.unwrap();
    let pong: String = redis::cmd("PING").query_async(&mut app_con).await.unwrap();
    assert_eq!(pong, "PONG");

    let e = distlock::Client::builder()
        .url(server.url())
        .redis_client(app)
        .build()
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Config);
}

/// A config as a Redisson user writes it: `single.address` with Redisson's `redis://` scheme
/// (it became `redis://redis://…`), a duration as a JSON number of seconds (it was refused);
/// `rediss://` in the address turns TLS on, verified against the CA file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redissons_address_form_and_numeric_durations() {
    let server = RedisServer::options().password("s3cret").start();
    let config: Config = serde_json::from_value(serde_json::json!({
        "single": { "address": format!("redis://127.0.0.1:{}", server.port()) },
        "password": "s3cret",
        "watchdog_lease": 6,
        "command_timeout": 2.5,
    }))
    .unwrap();
    let client = config.builder().unwrap().build().await.unwrap();
    assert_eq!(client.watchdog_lease(), Duration::from_secs(6));
    client
        .lock("redisson-form")
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();

    let tls = RedisServer::options().tls().start();
    let config: Config = serde_json::from_value(serde_json::json!({
        "single": { "address": format!("rediss://127.0.0.1:{}", tls.port()) },
        "tls_ca_cert": tls.tls_ca_cert().unwrap(),
    }))
    .unwrap();
    let client = config
        .builder()
        .unwrap()
        .build()
        .await
        .expect("rediss:// address");
    assert!(
        client.redacted_url().starts_with("rediss://"),
        "{}",
        client.redacted_url()
    );
    client
        .lock("redisson-tls")
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();

    let e = serde_json::from_str::<Config>(r#"{ "url": "redis://h/", "watchdog_lease": 30000 }"#)
        .unwrap_err();
    assert!(e.to_string().contains("milliseconds"), "{e}");
}

/// A password put where the URL goes (`DISTLOCK_URL=s3cretpw`) is not echoed by the error,
/// nor is one in a Redisson address with credentials.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_in_the_url_slot_is_never_echoed() {
    let vars = |name: &str| (name == "DISTLOCK_URL").then(|| "s3cretpw!x".to_string());
    let config = Config::from_lookup(vars).unwrap();
    assert!(!format!("{config:?}").contains("s3cretpw"));
    let e = config.builder().unwrap().build().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Config);
    assert!(!format!("{e:#} {e:?}").contains("s3cretpw"), "{e:#}");
    assert!(e.to_string().contains("no scheme"), "{e}");
    let e = Config::from_lookup(|name| (name == "DISTLOCK_URL").then(|| "localhost:6379".into()))
        .unwrap()
        .builder()
        .unwrap()
        .build()
        .await
        .unwrap_err();
    assert!(e.to_string().contains("use redis://localhost:6379"), "{e}");
}
