//! Connection errors say their cause, then the fix in the command's own terms: its flags and
//! variables, never a library method.

use std::process::Command;
use std::time::{Duration, Instant};

use distlock_test::RedisServer;

use crate::output;

/// Run `distlock status x` against `url` with `extra` arguments before the command; its
/// exit code and stderr.
fn status(url: &str, extra: &[&str]) -> (Option<i32>, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_distlock"));
    c.env("DISTLOCK_URL", url)
        .env_remove("DISTLOCK_LOG")
        .env_remove("DISTLOCK_PASSWORD")
        .env_remove("DISTLOCK_TLS_CA_CERT")
        .env_remove("SSL_CERT_FILE")
        .args(extra)
        .args(["status", "x"]);
    let out = output(c);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// NOAUTH: the server wants a password and none was given: say `--password`.
#[test]
fn noauth_names_the_password_flag() {
    let server = RedisServer::options().password("s3cret").start();
    let (code, err) = status(&format!("redis://127.0.0.1:{}/", server.port()), &[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("requires a password and none was given"),
        "{err}"
    );
    assert!(
        err.contains("give the password with --password or DISTLOCK_PASSWORD"),
        "{err}"
    );
    assert!(!err.contains("ClientBuilder"), "{err}");
}

/// A wrong password is a wrong password (WRONGPASS), not a percent-encoding problem, and
/// the fix names the flag.
#[test]
fn a_wrong_password_names_the_flag_not_encoding() {
    let server = RedisServer::options().password("s3cret").start();
    let url = format!("redis://127.0.0.1:{}/", server.port());
    let (code, err) = status(&url, &["--password", "wrong"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("WRONGPASS"), "{err}");
    assert!(err.contains("--password"), "{err}");
    assert!(!err.contains("percent"), "{err}");
    assert!(!err.contains("ClientBuilder"), "{err}");
    assert!(!err.contains("wrong@"), "{err}");
    // A password for a server that has none: the server's reason, and to give none.
    let plain = RedisServer::start();
    let (code, err) = status(&plain.url(), &["--password", "s3cretpw"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("without any password configured"), "{err}");
    assert!(
        err.contains("give no password (neither --password"),
        "{err}"
    );
    assert!(!err.contains("s3cretpw"), "{err}");
}

/// A TLS server signed by a private CA: fails at once, says the certificate is not trusted
/// and names `--tls-ca-cert`, not a connect timeout.
#[test]
fn an_untrusted_certificate_names_the_ca_flag() {
    let server = RedisServer::options().tls().start();
    let url = server.url().replace("#insecure", "");
    let started = Instant::now();
    let (code, err) = status(&url, &["--connect-timeout", "10s"]);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("not trusted"), "{err}");
    assert!(err.contains("--tls-ca-cert FILE"), "{err}");
    assert!(err.contains("UnknownIssuer"), "{err}");
    assert!(!err.contains("connect timeout"), "{err}");
    assert!(!err.contains("ClientBuilder"), "{err}");
}
