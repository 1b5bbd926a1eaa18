//! The lock family's fronts cannot drift apart: each has the verbs users expect of all of them.

/// The public verbs of the front defined in `file` (`pub fn` and `pub async fn` of its source).
fn verbs(file: &str) -> Vec<String> {
    let path = format!("{}/src/lock/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).expect("the front's source");
    text.lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let rest = l
                .strip_prefix("pub fn ")
                .or_else(|| l.strip_prefix("pub async fn "))?;
            Some(rest.split(['(', '<']).next()?.to_string())
        })
        .collect()
}

/// `Lock`, `FairLock` and `RwLock` each have the verbs every lock of the family answers: its
/// names, its client, its lease and hand-off settings and whether and how long it is held are
/// written once on `LockHandle<K>` (so no kind can lack them or say them differently), and
/// each kind has its own hand-off setter, status and operator's force unlock. A verb missing
/// from the base or a kind fails here with its name.
#[test]
fn every_front_has_the_verbs_every_lock_has() {
    const SHARED: &[&str] = &[
        "name",
        "key",
        "channel",
        "fencing_counter_key",
        "client",
        "lease",
        "lease_setting",
        "handoff_setting",
        "is_locked",
        "remaining",
    ];
    const EACH: &[&str] = &["handoff", "status", "force_unlock"];
    let lacks = |file: &str, wanted: &[&'static str]| -> Vec<&'static str> {
        let have = verbs(file);
        wanted
            .iter()
            .copied()
            .filter(|v| !have.iter().any(|h| h == v))
            .collect()
    };
    assert!(
        lacks("handle.rs", SHARED).is_empty(),
        "lock/handle.rs lacks {:?}",
        lacks("handle.rs", SHARED)
    );
    for file in ["plain.rs", "fair.rs", "rwlock.rs"] {
        let missing = lacks(file, EACH);
        assert!(missing.is_empty(), "lock/{file} lacks {missing:?}");
    }
}

/// Every front's `handoff` takes a [`Handoff`](super::Handoff) (a `bool` converts, as the
/// fair, read-write and leased kinds took one before): `true` is `Fifo`, `false` `Off`; the
/// kinds that hand off in arrival order only take `Retakes` as `Fifo`.
#[test]
fn a_handoff_policy_converts_and_keeps_arrival_order_where_the_kind_has_no_other() {
    use super::Handoff;
    assert_eq!(Handoff::from(true), Handoff::Fifo);
    assert_eq!(Handoff::from(false), Handoff::Off);
    assert_eq!(Handoff::Retakes(3).in_order(), Handoff::Fifo);
    assert_eq!(Handoff::Off.in_order(), Handoff::Off);
    assert_eq!(Handoff::Fifo.in_order(), Handoff::Fifo);
    assert!(Handoff::Retakes(3).is_on() && Handoff::Fifo.is_on() && !Handoff::Off.is_on());
}
