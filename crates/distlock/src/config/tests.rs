//! Config's own tests: the environment, the four deployment forms, durations, secrets.

use super::{ClusterServers, Config, SentinelServers, SingleServer};
use std::collections::HashMap;

fn from_vars(vars: &[(&str, &str)]) -> crate::Result<Config> {
    let vars: HashMap<&str, &str> = vars.iter().copied().collect();
    Config::from_lookup(|n| vars.get(n).map(|v| v.to_string()))
}

#[test]
fn the_environment_gives_the_clis_settings() {
    let c = from_vars(&[
        ("DISTLOCK_URL", "redis://h:1/"),
        ("DISTLOCK_PASSWORD", "p@ss"),
        ("DISTLOCK_KEY_PREFIX", "app:"),
        ("DISTLOCK_WATCHDOG_LEASE", "1m"),
        ("DISTLOCK_TIMEOUT", "0.5"),
        ("DISTLOCK_PUBSUB", "sharded"),
    ])
    .unwrap();
    assert_eq!(c.url.as_deref(), Some("redis://h:1/"));
    assert_eq!(c.password.as_deref(), Some("p@ss"));
    assert_eq!(c.command_timeout.as_deref(), Some("0.5"));
    assert!(c.builder().is_ok());
    assert!(!format!("{c:?}").contains("p@ss"));
    let bad = Config {
        watchdog_lease: Some("soon".into()),
        ..c.clone()
    };
    let e = bad.builder().unwrap_err();
    assert!(e.to_string().contains("watchdog_lease \"soon\""), "{e}");
    let bad = Config {
        pubsub: Some("loud".into()),
        ..c
    };
    assert!(bad.builder().unwrap_err().to_string().contains("pubsub"));
}

/// An error of `from_env` names the variable to fix, not the struct field.
#[test]
fn environment_errors_name_the_variable() {
    let e = from_vars(&[("DISTLOCK_WATCHDOG_LEASE", "soon")]).unwrap_err();
    assert_eq!(e.kind(), crate::ErrorKind::Config);
    assert!(
        e.to_string()
            .starts_with("DISTLOCK_WATCHDOG_LEASE \"soon\""),
        "{e}"
    );
    let e = from_vars(&[("DISTLOCK_TIMEOUT", "2 fortnights")]).unwrap_err();
    assert!(e.to_string().starts_with("DISTLOCK_TIMEOUT "), "{e}");
    let e = from_vars(&[("DISTLOCK_PUBSUB", "loud")]).unwrap_err();
    assert!(e.to_string().starts_with("DISTLOCK_PUBSUB \"loud\""), "{e}");
}

#[test]
fn one_deployment_of_four_forms() {
    let single = Config {
        single: Some(SingleServer {
            address: "h:1".into(),
        }),
        database: Some(2),
        tls: true,
        ..Config::default()
    };
    assert_eq!(single.deployment_url().unwrap(), "rediss://h:1/2");
    let sentinel = Config {
        sentinel: Some(SentinelServers {
            nodes: vec!["s1".into(), "s2:5000".into()],
            master: "m".into(),
        }),
        ..Config::default()
    };
    assert_eq!(
        sentinel.deployment_url().unwrap(),
        "redis-sentinel://s1,s2:5000#m"
    );
    let cluster = Config {
        cluster: Some(ClusterServers {
            nodes: vec!["c1:7000".into(), "c2:7000".into()],
        }),
        ..Config::default()
    };
    assert_eq!(
        cluster.deployment_url().unwrap(),
        "redis-cluster://c1:7000,c2:7000"
    );
    assert!(Config::default().deployment_url().is_err());
    let both = Config {
        url: Some("redis://h/".into()),
        ..cluster
    };
    assert!(both.deployment_url().is_err());
}

/// Redisson's addresses carry their scheme: `redis://` and `rediss://` (TLS) are taken
/// as Redisson takes them; other schemes, a mix, or `tls` against `redis://` are refused.
#[test]
fn redisson_addresses_with_their_scheme() {
    let single = |address: &str, tls: bool| Config {
        single: Some(SingleServer {
            address: address.into(),
        }),
        tls,
        ..Config::default()
    };
    let url = |c: Config| c.deployment_url();
    assert_eq!(
        url(single("redis://h:6379", false)).unwrap(),
        "redis://h:6379"
    );
    assert_eq!(
        url(single("redis://h:6379/", false)).unwrap(),
        "redis://h:6379"
    );
    assert_eq!(
        url(single("rediss://h:6379", false)).unwrap(),
        "rediss://h:6379"
    );
    assert_eq!(
        url(single("REDISS://h:6379", true)).unwrap(),
        "rediss://h:6379"
    );
    assert_eq!(url(single(":pw@h:1", false)).unwrap(), "redis://:pw@h:1");
    let e = url(single("redis://h:6379", true)).unwrap_err();
    assert!(e.to_string().contains("tls is true"), "{e}");
    let e = url(single("http://:s3cretpw@h:6379", false)).unwrap_err();
    assert!(e.to_string().contains("http://"), "{e}");
    assert!(!e.to_string().contains("s3cretpw"), "{e}");
    let cluster = |nodes: &[&str]| Config {
        cluster: Some(ClusterServers {
            nodes: nodes.iter().map(|n| n.to_string()).collect(),
        }),
        ..Config::default()
    };
    assert_eq!(
        url(cluster(&["rediss://c1:7000", "rediss://c2:7000"])).unwrap(),
        "rediss-cluster://c1:7000,c2:7000"
    );
    let e = url(cluster(&["redis://c1:7000", "rediss://:s3cretpw@c2:7000"])).unwrap_err();
    assert!(e.to_string().contains("mixes"), "{e}");
    assert!(!e.to_string().contains("s3cretpw"), "{e}");
    let sentinel = Config {
        sentinel: Some(SentinelServers {
            nodes: vec!["redis://s1:26379".into(), "redis://s2".into()],
            master: "m".into(),
        }),
        database: Some(1),
        ..Config::default()
    };
    assert_eq!(url(sentinel).unwrap(), "redis-sentinel://s1:26379,s2/1#m");
}

/// `database` and `tls` beside `url` were ignored without a word: refused.
#[test]
fn database_or_tls_beside_url_is_refused() {
    for c in [
        Config {
            url: Some("redis://h/".into()),
            database: Some(2),
            ..Config::default()
        },
        Config {
            url: Some("redis://h/".into()),
            tls: true,
            ..Config::default()
        },
    ] {
        let e = c.deployment_url().unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Config);
        assert!(e.to_string().contains("not to url"), "{e}");
    }
}

/// A number is seconds in every format (JSON here); one of 1000 or more is refused as
/// Redisson's milliseconds would be.
#[test]
fn durations_may_be_numbers_of_seconds() {
    let c: Config = serde_json::from_str(
        r#"{ "url": "redis://h/", "watchdog_lease": 30, "command_timeout": 0.5,
             "connect_timeout": "5s", "default_wait": null }"#,
    )
    .unwrap();
    let v = c.values(|f| f).unwrap();
    assert_eq!(v.watchdog_lease, Some(std::time::Duration::from_secs(30)));
    assert_eq!(
        v.command_timeout,
        Some(std::time::Duration::from_millis(500))
    );
    assert_eq!(v.connect_timeout, Some(std::time::Duration::from_secs(5)));
    assert_eq!(v.default_wait, None);
    let e = serde_json::from_str::<Config>(r#"{ "watchdog_lease": 30000 }"#).unwrap_err();
    assert!(e.to_string().contains("\"30000ms\""), "{e}");
    let e = serde_json::from_str::<Config>(r#"{ "watchdog_lease": -1 }"#).unwrap_err();
    assert!(e.to_string().contains("negative"), "{e}");
}

/// ShedLock's ISO-8601 durations read in a file as on the command line (one parser).
#[test]
fn durations_may_be_iso8601_as_shedlock_writes_them() {
    let c: Config = serde_json::from_str(
        r#"{ "url": "redis://h/", "watchdog_lease": "PT30S", "default_wait": "PT1M" }"#,
    )
    .unwrap();
    let v = c.values(|f| f).unwrap();
    assert_eq!(v.watchdog_lease, Some(std::time::Duration::from_secs(30)));
    assert_eq!(v.default_wait, Some(std::time::Duration::from_secs(60)));
}

/// `Debug` masks credentials wherever a file may put them.
#[test]
fn debug_masks_every_password() {
    let c = Config {
        url: Some("redis://:s3cretpw@h/".into()),
        single: Some(SingleServer {
            address: ":s3cretpw@host:6379".into(),
        }),
        sentinel: Some(SentinelServers {
            nodes: vec!["redis://u:s3cretpw@s1:26379".into()],
            master: "m".into(),
        }),
        cluster: Some(ClusterServers {
            nodes: vec!["app:s3cretpw@c1:7000".into()],
        }),
        password: Some("s3cretpw".into()),
        sentinel_password: Some("s3cretpw".into()),
        ..Config::default()
    };
    let shown = format!("{c:?} {c:#?}");
    assert!(!shown.contains("s3cretpw"), "{shown}");
    assert!(
        shown.contains("host:6379") && shown.contains("c1:7000"),
        "{shown}"
    );
}

/// A Redisson user's YAML names (`singleServerConfig`, `lockWatchdogTimeout`, …) are
/// refused with distlock's form of each, not serde's bare "unknown field".
#[test]
fn redissons_names_point_at_distlocks() {
    for (json, form) in [
        (
            r#"{"singleServerConfig": {"address": "redis://h:6379"}}"#,
            "single: {address:",
        ),
        (
            r#"{"sentinelServersConfig": {"masterName": "m"}}"#,
            "sentinel: {nodes:",
        ),
        (r#"{"clusterServersConfig": {}}"#, "cluster: {nodes:"),
        (
            r#"{"lockWatchdogTimeout": 30000}"#,
            "watchdog_lease: \"30s\"",
        ),
    ] {
        let e = serde_json::from_str::<Config>(json)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("is Redisson's name") && e.contains(form),
            "{json}: {e}"
        );
    }
    let c: Config = serde_json::from_str(r#"{"single": {"address": "redis://h:6379"}}"#).unwrap();
    assert_eq!(c.single.unwrap().address, "redis://h:6379");
}
