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
