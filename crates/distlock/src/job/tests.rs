//! Unit tests of the job lock: ShedLock's value and key formats.

use super::*;

#[test]
fn parses_shedlock_values() {
    let h = JobHolder::parse(
        "ADDED:2021-05-12T13:31:45.006Z@lixin-macbook.local:1b4e28ba-2fa1-11d2-883f-0016d3cca427",
        None,
    )
    .unwrap();
    assert_eq!(h.locked_at, "2021-05-12T13:31:45.006Z");
    assert_eq!(h.host, "lixin-macbook.local");
    assert_eq!(
        h.id.as_deref(),
        Some("1b4e28ba-2fa1-11d2-883f-0016d3cca427")
    );
    // ShedLock's older format, without the id.
    let h = JobHolder::parse("ADDED:2021-05-12T13:31:45.006Z@lixin-macbook.local", None).unwrap();
    assert_eq!(h.host, "lixin-macbook.local");
    assert_eq!(h.id, None);
    assert!(JobHolder::parse("something else", None).is_none());
}

#[test]
fn key_format_is_shedlocks() {
    assert_eq!(
        job_key("", "test", "hello-world"),
        "job-lock:test:hello-world"
    );
}
