//! The error type's own tests: display, reasons, the server's refusals quoted.

use super::*;

#[test]
fn not_held_carries_reason() {
    let e = Error::not_held("orders", NotHeldReason::HeldByOther);
    assert_eq!(e.kind(), ErrorKind::NotHeld);
    assert_eq!(e.not_held_reason(), Some(NotHeldReason::HeldByOther));
    assert!(e.to_string().contains("another owner"));
}

/// Each cause appears once in every way of showing the error: `{}`, `{:#}`, and the
/// `source()` chain walked as anyhow's `{:#}` does.
#[test]
fn display_does_not_repeat_the_source() {
    let io = std::io::Error::new(
        std::io::ErrorKind::ConnectionRefused,
        "Connection refused (os error 111)",
    );
    let e = Error::from_redis("connect to redis://:***@127.0.0.1:1/", io.into());
    assert_eq!(e.kind(), ErrorKind::Connection);
    let cause = "Connection refused (os error 111)";
    let plain = e.to_string();
    assert_eq!(
        plain,
        "connect to redis://:***@127.0.0.1:1/: cannot reach the server"
    );
    let mut chained = plain.clone();
    let mut src = std::error::Error::source(&e);
    while let Some(s) = src {
        chained.push_str(&format!(": {s}"));
        src = s.source();
    }
    assert_eq!(chained.matches(cause).count(), 1, "{chained}");
    assert_eq!(format!("{e:#}"), chained);
    assert!(
        std::error::Error::source(&e).is_some(),
        "the source is kept"
    );
    assert!(format!("{e:?}").contains(cause));

    // Server errors: the reply text is the source, once.
    let err = redis::RedisError::from((
        redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError),
        "READONLY You can't write against a read only replica.",
    ));
    let e = Error::from_redis("acquire \"x\"", err);
    assert_eq!(e.kind(), ErrorKind::Backend);
    assert!(!e.to_string().contains("READONLY"), "{e}");
    assert_eq!(format!("{e:#}").matches("READONLY").count(), 1, "{e:#}");

    // Errors without a source, unknown outcomes and node failures keep their text.
    let e = Error::new(ErrorKind::Connection, "release \"x\": no answer").outcome_unknown();
    assert_eq!(e.to_string(), format!("{e:#}"));
    assert!(e.to_string().ends_with("outcome unknown)"), "{e}");
    let e = Error::quorum(
        "1 of 3 nodes granted \"x\"; 2 needed",
        vec![NodeFailure {
            node: "redis://10.0.0.2/".into(),
            cause: "held by another owner".into(),
        }],
    );
    assert_eq!(
        e.to_string(),
        "1 of 3 nodes granted \"x\"; 2 needed; redis://10.0.0.2/: held by another owner"
    );
}

#[test]
fn a_server_refusal_is_quoted() {
    let err = redis::RedisError::from((
        redis::ErrorKind::Server(redis::ServerErrorKind::CrossSlot),
        "cross-slot",
        "Keys in request don't hash to the same slot".to_string(),
    ));
    let e = Error::from_redis("acquire \"a\"", err);
    assert_eq!(e.kind(), ErrorKind::Backend);
    assert_eq!(
        e.to_string(),
        "acquire \"a\": server error: CROSSSLOT Keys in request don't hash to the same slot"
    );
    let err = redis::RedisError::from((
        redis::ErrorKind::Server(redis::ServerErrorKind::ClusterDown),
        "cluster down",
        "The cluster is down".to_string(),
    ));
    let e = Error::from_redis("acquire \"a\"", err);
    assert_eq!(e.kind(), ErrorKind::Connection);
    assert!(
        e.to_string().ends_with("CLUSTERDOWN The cluster is down"),
        "{e}"
    );
}

#[test]
fn wrongtype_is_classified() {
    let err = redis::RedisError::from((
        redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError),
        "WRONGTYPE Operation against a key holding the wrong kind of value",
    ));
    assert_eq!(Error::from_redis("x", err).kind(), ErrorKind::WrongType);
}

/// An ACL refusal inside a script, as each server words it (Redis 7's NOPERM, Redis < 7.2's
/// "can't run this command", Valkey 8's "ACL failure in script"): NoPermission.
#[test]
fn an_acl_refusal_inside_a_script_is_no_permission() {
    for text in [
        "NOPERM User u has no permissions to run the 'pexpire' command",
        "Error running script: The user executing the script can't run this command or subcommand",
        "ACL failure in script: User u has no permissions to run the 'pexpire' command",
    ] {
        let err = redis::RedisError::from((
            redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError),
            "script refused",
            text.to_string(),
        ));
        let e = Error::from_redis("acquire \"x\"", err);
        assert_eq!(e.kind(), ErrorKind::NoPermission, "{text}");
    }
}
