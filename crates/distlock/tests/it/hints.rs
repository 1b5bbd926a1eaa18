//! Errors that point at the right fix: each says its cause first, then what to change in the
//! library's terms (a `ClientBuilder` method), and carries it as `Error::fix` for front ends
//! with their own terms (the CLI's flags).

use std::time::Duration;

use distlock::{Client, ErrorKind, Fix};

use crate::util::*;

/// Connect with `builder`; the error (a connect must fail).
async fn refused(builder: distlock::ClientBuilder) -> distlock::Error {
    builder.build().await.expect_err("the connect must fail")
}

/// No password sent to a protected server: NOAUTH, with the fix of giving one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn noauth_says_to_give_the_password() {
    let server = RedisServer::options().password("s3cret").start();
    let e = refused(Client::builder().url(format!("redis://127.0.0.1:{}/", server.port()))).await;
    assert_eq!(e.kind(), ErrorKind::Auth, "{e}");
    assert_eq!(e.fix(), Some(Fix::GivePassword), "{e}");
    let text = e.to_string();
    assert!(
        text.contains("requires a password and none was given"),
        "{text}"
    );
    assert!(text.ends_with("give the password with ClientBuilder::password (or in the URL: redis://:PASSWORD@HOST)"), "{text}");
    assert!(!e.without_fix().to_string().contains("ClientBuilder"));
}

/// A wrong password, in the URL or apart: the server's WRONGPASS, and the fix of checking the
/// credentials — not of percent-encoding a password that has nothing to encode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_is_not_an_encoding_problem() {
    let server = RedisServer::options().password("s3cret").start();
    let port = server.port();
    for b in [
        Client::builder().url(format!("redis://:wrong@127.0.0.1:{port}/")),
        Client::builder()
            .url(format!("redis://127.0.0.1:{port}/"))
            .password("wrong"),
    ] {
        let e = refused(b).await;
        assert_eq!(e.kind(), ErrorKind::Auth, "{e}");
        assert_eq!(e.fix(), Some(Fix::CheckCredentials), "{e}");
        let text = e.to_string();
        assert!(text.contains("WRONGPASS"), "{text}");
        assert!(!text.contains("percent"), "{text}");
        assert!(!format!("{e:#} {e:?}").contains("wrong@"), "{e:#}");
    }
    // A `%` in the URL's password starts an escape: there, encoding is the likely fix.
    let e = refused(Client::builder().url(format!("redis://:s3%63ret%@127.0.0.1:{port}/"))).await;
    assert_eq!(e.fix(), Some(Fix::EncodePassword), "{e}");
}

/// A password given to a server that has none: the server's own reason is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_for_a_server_without_one_keeps_the_servers_reason() {
    let server = RedisServer::start();
    let e = refused(Client::builder().url(server.url()).password("s3cretpw")).await;
    assert_eq!(e.kind(), ErrorKind::Auth, "{e}");
    assert_eq!(e.fix(), Some(Fix::RemovePassword), "{e}");
    let text = format!("{e:#} {e:?}");
    assert!(text.contains("without any password configured"), "{text}");
    assert!(!text.contains("s3cretpw"), "{text}");
}

/// An unencoded `#` in the URL's password was a DNS error under a URL that looked right; a
/// bad port after a password was blamed on the password.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn url_mistakes_are_named_where_they_are() {
    let server = RedisServer::options().password("s3#cret").start();
    let port = server.port();
    for url in [
        format!("redis://:s3#cret@127.0.0.1:{port}/"),
        format!("redis://s3#cret@127.0.0.1:{port}/"),
    ] {
        let e = refused(Client::builder().url(&url)).await;
        assert_eq!(e.kind(), ErrorKind::Config, "{url}: {e}");
        assert_eq!(e.fix(), Some(Fix::EncodePassword), "{e}");
        assert!(e.to_string().contains("unencoded `#`"), "{e}");
        assert!(!format!("{e:#}").contains("cret"), "{e:#}");
    }
    let e = refused(Client::builder().url("redis://:s3cret@127.0.0.1:99999/")).await;
    assert_eq!(e.kind(), ErrorKind::Config, "{e}");
    assert_eq!(e.fix(), None, "{e}");
    assert!(e.to_string().contains("the port is not a number"), "{e}");
    assert!(!e.to_string().contains("password"), "{e}");
}

/// A TLS server signed by a CA that is not trusted fails at once (not after the connect
/// timeout) with the fix of giving the CA.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_certificate_says_to_give_the_ca() {
    let server = RedisServer::options().tls().start();
    let url = server.url().replace("#insecure", "");
    let started = std::time::Instant::now();
    let e = refused(
        Client::builder()
            .url(&url)
            .connect_timeout(Duration::from_secs(10)),
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
    assert_eq!(e.fix(), Some(Fix::TrustCa), "{e}");
    let text = e.to_string();
    assert!(text.contains("not trusted"), "{text}");
    assert!(text.contains("ClientBuilder::tls_ca_cert"), "{text}");
    assert!(format!("{e:#}").contains("UnknownIssuer"), "{e:#}");
}

/// A semaphore whose key holds a user's string (not a count): every verb says so
/// (`WrongType`), instead of "unexpected reply", a raw Lua error or a server error, and
/// leaves no request record behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semaphore_over_a_string_that_is_not_a_count_says_so() {
    let (server, client) = setup().await;
    for value in ["bob", "3.5", "02134"] {
        let _: () = cmd(&server, &["SET", "sem", value]);
        let sem = client.semaphore("sem");
        let e = sem.try_acquire().await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::WrongType, "{value} acquire: {e:#}");
        let e = sem.available_permits().await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::WrongType, "{value} available: {e:#}");
        let e = sem.add_permits(1).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::WrongType, "{value} add: {e:#}");
        let leased = client.leased_semaphore("sem");
        let e = leased.try_acquire().await.unwrap_err();
        assert_eq!(
            e.kind(),
            ErrorKind::WrongType,
            "{value} leased acquire: {e:#}"
        );
        let v: String = cmd(&server, &["GET", "sem"]);
        assert_eq!(v, value, "the user's value is unchanged");
        let records: Vec<String> = cmd(&server, &["KEYS", "distlock_semaphore_*"]);
        assert!(
            records.is_empty(),
            "{value}: request records left: {records:?}"
        );
    }
}

/// The 1,025th read hold of one owner is refused as bad input with the limit named, not as a
/// server error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_many_read_holds_is_invalid_input() {
    let (_server, client) = setup().await;
    let rw = client.rw_lock("many-reads");
    let first = rw.read().await.unwrap();
    let mut holds = vec![];
    for _ in 1..1024 {
        holds.push(first.reenter().await.unwrap());
    }
    let e = first.reenter().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e:#}");
    assert!(e.to_string().contains("1024"), "{e}");
    assert!(!e.to_string().contains("ERR "), "{e}");
}

/// A hash-tagged latch name on a Redis Cluster: refused up front as bad input, with the
/// reason (the latch's channel, Redisson's `redisson_countdownlatch__channel__{<name>}`, falls
/// in another slot), as every other primitive's name is checked — not a raw `CROSSSLOT`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hash_tagged_latch_name_on_a_cluster_is_refused_up_front() {
    let set = distlock_test::ClusterSet::start();
    let client = Client::builder().url(set.url()).build().await.unwrap();
    let latch = client.count_down_latch("{job42}:done");
    let e = latch.try_set_count(2).await.unwrap_err();
    eprintln!("{e:#}");
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e:#}");
    assert!(!e.to_string().contains("CROSSSLOT"), "{e}");
    assert!(e.to_string().contains("hash tag"), "{e}");
    let e = latch.count_down().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e:#}");
    // A name without braces works.
    let plain = client.count_down_latch("job42-done");
    assert!(plain.try_set_count(1).await.unwrap());
    assert_eq!(plain.count_down().await.unwrap(), 0);
}
