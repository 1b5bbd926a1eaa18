use std::time::Duration;

use distlock::{Client, ErrorKind, Owner};

use crate::util::*;
use distlock::Lease;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_names_and_durations_are_refused_and_change_nothing() {
    let (server, client) = setup().await;
    let cases: Vec<(&str, distlock::Result<Option<distlock::LockGuard>>)> = vec![
        ("empty name", client.lock("").try_acquire().await),
        (
            "name over 64 KiB",
            client.lock("x".repeat(64 * 1024 + 1)).try_acquire().await,
        ),
        (
            "zero lease",
            client.lock("ok").lease(Duration::ZERO).try_acquire().await,
        ),
        (
            "sub-millisecond lease",
            client
                .lock("ok")
                .lease(Duration::from_micros(1))
                .try_acquire()
                .await,
        ),
        (
            "overflowing lease",
            client.lock("ok").lease(Duration::MAX).try_acquire().await,
        ),
        (
            "overflowing wait",
            client.lock("ok").try_acquire_for(Duration::MAX).await,
        ),
    ];
    for (what, r) in cases {
        let err = r.expect_err(what);
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{what}: {err}");
    }
    assert_eq!(
        client.lock("").is_locked().await.unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    let g = client.lock("ok").acquire().await.unwrap();
    assert_eq!(
        g.extend(Duration::ZERO).await.unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    assert_eq!(
        g.extend(Duration::MAX).await.unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    g.release().await.unwrap();
    assert!(lock_keys(&server).is_empty(), "{:?}", keys(&server));
    for bad in ["", "no-colon", ":x", "x:", "distlock:fencing-token"] {
        assert_eq!(
            Owner::parse(bad).unwrap_err().kind(),
            ErrorKind::InvalidInput,
            "{bad:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_key_type_is_reported_and_left_alone() {
    let (server, client) = setup().await;
    let _: () = cmd(&server, &["SET", "a-string", "payload"]);
    let _: i64 = cmd(&server, &["RPUSH", "a-list", "x"]);
    for name in ["a-string", "a-list"] {
        let err = client.lock(name).try_acquire().await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::WrongType, "{err}");
        let err = client
            .lock(name)
            .try_acquire_for(Duration::from_millis(50))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::WrongType);
        assert_eq!(
            client.lock(name).status().await.unwrap_err().kind(),
            ErrorKind::WrongType
        );
    }
    let v: String = cmd(&server, &["GET", "a-string"]);
    assert_eq!(v, "payload");
    let len: i64 = cmd(&server, &["LLEN", "a-list"]);
    assert_eq!(len, 1);
    assert_eq!(
        keys(&server),
        vec!["a-list".to_string(), "a-string".to_string()]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_server_is_a_connection_error() {
    let port = distlock_test::free_port();
    let err = Client::builder()
        .url(format!("redis://127.0.0.1:{port}/"))
        .connect_timeout(Duration::from_millis(500))
        .build()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_password_is_an_auth_error_that_never_shows_the_password() {
    let server = RedisServer::options()
        .password("right-horse-battery")
        .start();
    let url = format!("redis://:wrong-staple-9@127.0.0.1:{}/", server.port());
    let err = Client::connect(&url).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Auth, "{err}");
    for text in [err.to_string(), format!("{err:?}")] {
        assert!(!text.contains("wrong-staple-9"), "{text}");
        assert!(!text.contains("right-horse-battery"), "{text}");
    }
    let builder = Client::builder().url(server.url());
    assert!(!format!("{builder:?}").contains("right-horse-battery"));
    let client = builder.build().await.unwrap();
    assert!(!format!("{client:?}").contains("right-horse-battery"));
    assert!(client.redacted_url().contains("***"));
    let g = client.lock("authed").acquire().await.unwrap();
    g.release().await.unwrap();
}

/// A password with URL-reserved characters: written raw into the URL it fails with a hint to
/// percent-encode it or give it apart, never showing it; given apart
/// (`ClientBuilder::password`, Redisson's `setPassword`) it works as it is, in place of the
/// URL's, with or without a user name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_with_reserved_characters_is_given_apart_or_hinted() {
    let password = "p@ss:w/rd#?%41";
    let server = RedisServer::options().password(password).start();
    let port = server.port();
    for url in [
        format!("redis://:{password}@127.0.0.1:{port}/"),
        format!("redis://default:{password}@127.0.0.1:{port}/"),
    ] {
        let err = Client::connect(&url).await.unwrap_err();
        assert!(
            matches!(err.kind(), ErrorKind::Config | ErrorKind::Auth),
            "{err}"
        );
        let text = err.to_string();
        assert!(text.contains("percent-encode"), "{text}");
        assert!(text.contains("ClientBuilder::password"), "{text}");
        assert!(
            !text.contains("rd#?") && !format!("{err:?}").contains("rd#?"),
            "{text}"
        );
    }
    for url in [
        format!("redis://127.0.0.1:{port}/"),
        format!("redis://:wrong@127.0.0.1:{port}/"),
        format!("redis://default@127.0.0.1:{port}/"),
    ] {
        let client = Client::builder()
            .url(&url)
            .password(password)
            .build()
            .await
            .unwrap_or_else(|e| panic!("{url}: {e}"));
        assert!(!format!("{client:?}").contains("rd#?"));
        let g = client.lock("apart").acquire().await.unwrap();
        g.release().await.unwrap();
    }
    let client = Client::builder()
        .url(format!("redis://127.0.0.1:{port}/"))
        .username("default")
        .password(password)
        .build()
        .await
        .unwrap();
    client
        .lock("apart")
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_urls_and_settings_are_config_errors() {
    for url in [
        "http://127.0.0.1/",
        "redis://:secret-pw@127.0.0.1:notaport/",
        "not a url",
    ] {
        let err = Client::connect(url).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Config, "{url}: {err}");
        assert!(!err.to_string().contains("secret-pw"));
        assert!(!format!("{err:?}").contains("secret-pw"));
    }
    let err = Client::builder().build().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Config);
    let err = Client::builder()
        .url("redis://127.0.0.1/")
        .watchdog_lease(Duration::ZERO)
        .build()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Config);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_times_out_with_not_acquired() {
    let server = RedisServer::start();
    let client = Client::builder()
        .url(server.url())
        .default_wait(Duration::from_millis(200))
        .build()
        .await
        .unwrap();
    let _g = client.lock("held").acquire().await.unwrap();
    let start = tokio::time::Instant::now();
    let err = client.lock("held").acquire().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotAcquired);
    assert!(start.elapsed() >= Duration::from_millis(200));
    assert!(start.elapsed() < Duration::from_secs(2));
}

/// Braces that do not make a Redis Cluster hash tag (`a{b`, `{}x`, `x}{y`) would put a
/// primitive's helper keys in other slots than its key (`CROSSSLOT` on a Cluster): every
/// primitive with helper keys refuses them on every topology, before any I/O, with an error
/// that says why. A proper tag works, and the job lock (one key) takes any name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_whose_braces_are_no_hash_tag_are_refused() {
    let (server, client) = setup().await;
    let calls_before = script_calls(&server);
    for name in ["a{b", "{}x", "x}{y", "x}y"] {
        let errors = [
            client.lock(name).try_acquire().await.err(),
            client.fair_lock(name).try_acquire().await.err(),
            client.rw_lock(name).try_read().await.err(),
            client.semaphore(name).try_acquire().await.err(),
            client
                .leased_semaphore(name)
                .lease(Duration::from_secs(1))
                .try_acquire()
                .await
                .err(),
            client.count_down_latch(name).count_down().await.err(),
        ];
        for (i, e) in errors.into_iter().enumerate() {
            let e = e.unwrap_or_else(|| panic!("{name:?}: primitive {i} accepted it"));
            assert_eq!(e.kind(), ErrorKind::InvalidInput, "{name:?}: {e}");
            assert!(e.to_string().contains("hash tag"), "{name:?}: {e}");
        }
    }
    assert_eq!(
        script_calls(&server),
        calls_before,
        "a refused name reached the server"
    );
    let g = client.lock("{user42}:orders").try_acquire().await.unwrap();
    assert!(g.is_some(), "a proper hash tag is a name like any other");
    let job = client
        .job_lock("x}{y")
        .at_most_for(Duration::from_secs(5))
        .try_acquire()
        .await
        .unwrap();
    assert!(job.is_some(), "the job lock has no helper keys");
}
