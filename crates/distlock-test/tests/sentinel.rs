//! The Sentinel deployment: it starts ready, and a killed master is replaced by a replica.

use std::time::{Duration, Instant};

use distlock_test::sentinel::role;
use distlock_test::testing::cmd;
use distlock_test::SentinelSet;

#[test]
fn a_killed_master_fails_over_to_a_replica() {
    let started = Instant::now();
    let mut set = SentinelSet::start();
    println!("sentinel set ready in {:?}", started.elapsed());

    let first = set.servers()[0].port();
    assert_eq!(set.master_port(), first);
    assert_eq!(set.master().port(), first);
    assert_eq!(role(set.master()).as_deref(), Some("master"));
    for replica in &set.servers()[1..] {
        assert_eq!(role(replica).as_deref(), Some("slave"));
    }
    for sentinel in set.sentinels() {
        assert_eq!(role(sentinel).as_deref(), Some("sentinel"));
    }
    let ports: Vec<String> = set
        .sentinels()
        .iter()
        .map(|s| format!("127.0.0.1:{}", s.port()))
        .collect();
    assert_eq!(
        set.url(),
        format!("redis-sentinel://{}#distlock", ports.join(","))
    );
    assert_eq!(set.master_name(), "distlock");

    let old = set.kill_master();
    assert_eq!(old, first);
    let killed = Instant::now();
    let new = set.wait_for_failover(old, Duration::from_secs(12));
    let took = killed.elapsed();
    println!("failover from {old} to {new} took {took:?} after the kill");

    let replicas: Vec<u16> = set.servers()[1..].iter().map(|s| s.port()).collect();
    assert!(replicas.contains(&new), "{new} is none of {replicas:?}");
    let promoted = set
        .server_mut(new)
        .expect("the new master is a server of the set");
    assert_eq!(role(promoted).as_deref(), Some("master"));
    let _: () = cmd(promoted, &["SET", "after-failover", "1"]);
    assert_eq!(set.master_port(), new);
    assert_eq!(set.master().port(), new);
}

#[test]
fn start_with_names_the_master() {
    let set = SentinelSet::start_with("orders");
    assert_eq!(set.master_name(), "orders");
    assert!(set.url().ends_with("#orders"), "{}", set.url());
    let (_, port): (String, u16) = cmd(
        &set.sentinels()[2],
        &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "orders"],
    );
    assert_eq!(port, set.servers()[0].port());
    let info: String = cmd(set.master(), &["INFO", "replication"]);
    assert!(info.contains("connected_slaves:2"), "{info}");
}
