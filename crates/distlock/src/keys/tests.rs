//! Unit tests of the key names, slots and input checks.

use super::*;

#[test]
fn helper_names_put_the_hash_tag_and_the_tail_where_redisson_does() {
    assert_eq!(
        unlock_latch("orders", "r1"),
        "redisson_unlock_latch:{orders}:r1"
    );
    assert_eq!(
        unlock_latch("{user:1}:orders", "r1"),
        "redisson_unlock_latch:{user:1}:orders:r1"
    );
    assert_eq!(acquire_latch("o", ""), "distlock_acquire_latch:{o}:");
    assert_eq!(lock_grant_channel("o", "c"), "distlock_lock_grant:{o}:c");
    assert_eq!(client_notice_channel("c"), "distlock_client:{c}");
    assert_eq!(
        job_notice_channel("job-lock:prod:x"),
        "distlock_job:{job-lock:prod:x}"
    );
    assert_eq!(
        permit_grant_channel("o", "c"),
        "distlock_permit_grant:{o}:c"
    );
    assert_eq!(lock_queue("{t}x"), "distlock_lock_queue:{t}x");
    assert_eq!(lock_channel("o"), "redisson_lock__channel:{o}");
}

#[test]
fn names_follow_redisson_prefix_name() {
    assert_eq!(lock_channel("orders"), "redisson_lock__channel:{orders}");
    assert_eq!(
        lock_channel("{u1}:cart"),
        "redisson_lock__channel:{u1}:cart"
    );
    assert_eq!(
        unlock_latch("orders", "r1"),
        "redisson_unlock_latch:{orders}:r1"
    );
}

/// The builders that replaced names spelled out at their call sites name the same keys,
/// byte for byte, as the old spellings (`prefixed(<literal>, key)` and `:<request id>`).
#[test]
fn builders_name_what_the_call_sites_spelled_out() {
    for key in ["orders", "{user:1}:orders", "pre:{t}x"] {
        let id = "6f1c0e1e:3:0";
        assert_eq!(
            semaphore_grant_latch(key, id),
            format!("{}:{id}", prefixed("distlock_semaphore_grants", key))
        );
        assert_eq!(
            semaphore_release_latch(key, id),
            format!("{}:{id}", prefixed("distlock_semaphore_releases", key))
        );
        assert_eq!(
            legacy_semaphore_leases(key),
            prefixed("redisson__timeout__set", key)
        );
    }
    assert_eq!(
        semaphore_grant_latch("orders", "c:3:0"),
        "distlock_semaphore_grants:{orders}:c:3:0"
    );
    assert_eq!(
        semaphore_release_latch("{u}x", "c:3:0"),
        "distlock_semaphore_releases:{u}x:c:3:0"
    );
    assert_eq!(
        legacy_semaphore_leases("exports"),
        "redisson__timeout__set:{exports}"
    );
    assert_eq!(job_lock("prod", "report"), "job-lock:prod:report");
    assert_eq!(job_lock("", "a:b"), "job-lock::a:b");
}

#[test]
fn durations_are_checked() {
    assert!(lease_ms("lease", Duration::ZERO).is_err());
    assert!(lease_ms("lease", Duration::from_micros(10)).is_err());
    assert!(lease_ms("lease", Duration::MAX).is_err());
    assert_eq!(lease_ms("lease", Duration::from_secs(30)).unwrap(), 30_000);
    assert!(check_wait(Duration::ZERO).is_ok());
    assert!(check_wait(Duration::MAX).is_err());
}

#[test]
fn names_are_checked() {
    assert!(check_name("").is_err());
    assert!(check_name(&"x".repeat(MAX_NAME_LEN + 1)).is_err());
    assert!(check_name(&"x".repeat(MAX_NAME_LEN)).is_ok());
    for bad in ["a{b", "{}x", "x}{y", "x}y", "}"] {
        assert!(check_name(bad).is_err(), "{bad:?}");
    }
    for good in ["{user42}:orders", "a{b}c", "a}b{c}", "{a}{b}", "orders"] {
        assert!(check_name(good).is_ok(), "{good:?}");
    }
}

#[test]
fn key_slots_follow_the_cluster_spec() {
    // CRC16/XMODEM's check value: CRC of "123456789" = 0x31C3.
    assert_eq!(CRC16.checksum(b"123456789"), 0x31C3);
    // CLUSTER KEYSLOT answers of redis-server 7.0 (tests/it/fencing.rs compares hundreds
    // more against a live server).
    assert_eq!(key_slot("somekey"), 11058);
    assert_eq!(key_slot("foo"), 12182);
    assert_eq!(key_slot("foo{hash_tag}"), 2515);
    assert_eq!(key_slot("bar{hash_tag}"), 2515);
    // Hash tags, as the spec's examples: the first '{' and the first '}' after it.
    assert_eq!(key_slot("{user1000}.following"), key_slot("user1000"));
    assert_eq!(key_slot("{user1000}.followers"), key_slot("user1000"));
    assert_eq!(hash_tag(b"foo{}{bar}"), b"foo{}{bar}");
    assert_eq!(hash_tag(b"foo{{bar}}zap"), b"{bar");
    assert_eq!(hash_tag(b"foo{bar}{zap}"), b"bar");
    assert_eq!(hash_tag(b"{}"), b"{}");
    assert_eq!(hash_tag(b"no}tag{"), b"no}tag{");
    assert_eq!(hash_tag(b"{user:1}:orders"), b"user:1");
}

/// Every slot has a tag; the tag hashes to its slot; it is the first string hashing there
/// in the documented order (shorter first, then ASCII order over 0-9A-Za-z), checked by
/// walking every string of up to 3 characters independently of the table's builder.
#[test]
fn every_slot_has_the_first_alphanumeric_tag_that_hashes_to_it() {
    let started = std::time::Instant::now();
    assert_eq!(slot_tag(0), "06S");
    eprintln!("slot tag table built in {:?}", started.elapsed());
    assert_eq!(slot_tag(1), "Qi");
    assert_eq!(slot_tag(9), "ru");
    assert_eq!(slot_tag(16383), "6ZJ");
    let mut seen = vec![false; usize::from(SLOTS)];
    let alphabet: Vec<char> = ('0'..='9').chain('A'..='Z').chain('a'..='z').collect();
    let mut strings: Vec<String> = alphabet.iter().map(|c| c.to_string()).collect();
    let mut all = strings.clone();
    for _ in 1..3 {
        strings = strings
            .iter()
            .flat_map(|s| alphabet.iter().map(move |c| format!("{s}{c}")))
            .collect();
        all.extend(strings.iter().cloned());
    }
    for s in &all {
        let slot = usize::from(key_slot(s));
        if !seen[slot] {
            seen[slot] = true;
            assert_eq!(slot_tag(slot as u16), s, "slot {slot}");
        }
    }
    assert!(seen.iter().all(|&s| s), "a slot without a tag");
    for slot in 0..SLOTS {
        let tag = slot_tag(slot);
        assert!((1..=3).contains(&tag.len()), "{slot}: {tag:?}");
        assert!(tag.bytes().all(|b| b.is_ascii_alphanumeric()), "{tag:?}");
        assert_eq!(key_slot(format!("{{{tag}}}")), slot);
    }
}

#[test]
fn the_fencing_counter_hashes_to_the_lock_slot() {
    assert_eq!(
        fencing_counter("", "orders"),
        format!(
            "distlock:fencing-counter:{{{}}}",
            slot_tag(key_slot("orders"))
        )
    );
    assert_eq!(
        legacy_fencing_counter("app:"),
        "app:distlock:fencing-counter"
    );
    let names = [
        "orders",
        "{user:1}:orders",
        "a{b",
        "{}x",
        "x}{y}",
        "",
        "λ{ü}",
    ];
    for prefix in ["", "app:", "{app}:", "a}b:"] {
        for name in names {
            let key = format!("{prefix}{name}");
            let counter = fencing_counter(prefix, &key);
            assert!(counter.starts_with(&format!("{prefix}distlock:fencing-counter:{{")));
            assert_eq!(key_slot(&counter), key_slot(&key), "{counter} / {key}");
        }
    }
    // Names of one hash tag share a slot, hence a counter.
    assert_eq!(
        fencing_counter("", "{user:1}:orders"),
        fencing_counter("", "{user:1}:carts")
    );
}

#[test]
fn drift_is_one_percent_plus_two_ms() {
    assert_eq!(drift(Duration::from_secs(10)), Duration::from_millis(102));
}

/// The names built without formatting are the formatted ones: a request's unlock latch, a
/// fencing counter, and the digits they use.
#[test]
fn names_built_in_one_allocation_match_the_formatted_ones() {
    for n in [0, 1, 9, 10, 99, 1234567890, u64::MAX] {
        assert_eq!(Digits::of(n).as_str(), n.to_string());
        for key in ["orders", "{user:1}:orders", ""] {
            assert_eq!(
                unlock_latch_of(key, "c-1", n),
                unlock_latch(key, &format!("c-1:r{n}"))
            );
        }
    }
    for n in [-1i64, i64::MIN, i64::MAX] {
        assert_eq!(Digits::of(n).as_str(), n.to_string());
    }
    for (prefix, key) in [("", "orders"), ("app:", "{user:1}:orders"), ("p{x}", "a")] {
        assert_eq!(
            fencing_counter(prefix, key),
            format!(
                "{prefix}{FENCING_COUNTER_PREFIX}:{{{}}}",
                slot_tag(key_slot(key))
            )
        );
    }
}

/// The scripts that pair a count-down's count with its request number multiply by the block
/// of request numbers a record set holds (`latch_count_down.lua` writes the member,
/// and reads it back on a resend): both use [`super::record::RECORD_BLOCK`].
#[test]
fn the_count_down_records_are_encoded_with_the_block_size() {
    let block = super::record::RECORD_BLOCK;
    let script = include_str!("../scripts/latch_count_down.lua");
    assert!(script.contains(&format!("-(left * {block} + ARGV[2])")));
    assert!(script.contains(&format!("if (n - 1) % {block} + 1 == f then")));
    assert!(script.contains(&format!("return (n - f) / {block}")));
}

/// A request's record names the same set and member at every send, and its set's TTL covers
/// the epoch and the records' lifetime; a send after the epoch is late.
#[test]
fn a_record_names_one_set_and_member_and_its_ttl_covers_the_epoch() {
    let r = super::Record::new(
        super::RecordKind::Grant,
        "s",
        "c",
        130,
        25_500,
        1_000,
        10_000,
    );
    assert_eq!(r.key, "distlock_semaphore_grants:{s}:c:25:2");
    assert_eq!(r.field, "3");
    assert_eq!(r.ttl(25_500), (500 + 11_000, false));
    assert_eq!(r.ttl(25_999), (1 + 11_000, false));
    assert_eq!(r.ttl(26_000), (11_000, true));
    assert_eq!(r.ttl(90_000), (11_000, true));
}

/// The latch's count-down names the latch's channel itself (it is no key of the call), as
/// the client does ([`super::latch_channel`]), where waiters listen.
#[test]
fn the_count_down_names_the_latch_channel_as_the_client_does() {
    let src = include_str!("../scripts/latch_count_down.lua");
    let (before, after) = super::latch_channel("\u{1}")
        .split_once('\u{1}')
        .map(|(b, a)| (b.to_string(), a.to_string()))
        .expect("the key in the channel");
    assert!(
        src.contains(&format!("publish('{before}' .. KEYS[1] .. '{after}', '0')")),
        "latch_count_down.lua names another channel than {before}<key>{after}"
    );
}
