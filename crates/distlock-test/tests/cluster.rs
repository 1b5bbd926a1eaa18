//! The Redis Cluster: it starts ok, keys live on the master of their slot, a killed master is
//! replaced by its replica, a manual failover swaps roles, and a slot moves with its keys.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use distlock_test::sentinel::role;
use distlock_test::testing::cmd;
use distlock_test::{ClusterSet, RedisServer};

/// `GET key` on `node`: the value, or the port a `MOVED`/`ASK` error redirects to.
fn get(node: &RedisServer, key: &str) -> Result<Option<String>, u16> {
    let mut con = node.connection();
    redis::cmd("GET").arg(key).query(&mut con).map_err(|e| {
        // (address, slot) of a MOVED or ASK error.
        let port = e
            .redirect_node()
            .and_then(|(addr, _)| addr.rsplit(':').next());
        port.and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("GET {key} on {}: {e}", node.port()))
    })
}

#[test]
fn a_cluster_serves_fails_over_and_migrates_a_slot() {
    let started = Instant::now();
    let mut cluster = ClusterSet::start();
    println!("cluster ready in {:?}", started.elapsed());

    let ports: Vec<u16> = cluster.nodes().iter().map(RedisServer::port).collect();
    assert_eq!(ports.len(), 6);
    assert_eq!(
        cluster.url(),
        format!(
            "redis-cluster://127.0.0.1:{},127.0.0.1:{},127.0.0.1:{}",
            ports[0], ports[1], ports[2]
        )
    );
    let masters: Vec<u16> = cluster.masters().iter().map(|m| m.port()).collect();
    assert_eq!(masters, ports[..3]);
    for i in 0..3 {
        assert_eq!(
            cluster.replica_of(ports[i]).map(RedisServer::port),
            Some(ports[i + 3])
        );
        let bus = cluster.bus_port(ports[i]).unwrap();
        assert!(!ports.contains(&bus), "bus port {bus} is a data port");
    }

    // One key per master, written through the right node and replicated before going on.
    let mut keys: BTreeMap<u16, String> = BTreeMap::new();
    for i in 0.. {
        let key = format!("key-{i}");
        keys.entry(cluster.node_for_key(&key).port()).or_insert(key);
        if keys.len() == 3 {
            break;
        }
        assert!(i < 100, "100 keys all hash to {keys:?}");
    }
    for (&port, key) in &keys {
        let node = cluster.node_for_key(key);
        assert_eq!(node.port(), port);
        let mut con = node.connection();
        let _: () = redis::cmd("SET")
            .arg(key)
            .arg(format!("value of {key}"))
            .query(&mut con)
            .unwrap();
        let acked: u32 = redis::cmd("WAIT").arg(1).arg(1000).query(&mut con).unwrap();
        assert_eq!(acked, 1, "{key} was not replicated");
        assert_eq!(get(node, key), Ok(Some(format!("value of {key}"))));
        let elsewhere = cluster.masters().into_iter().find(|m| m.port() != port);
        assert_eq!(
            get(elsewhere.unwrap(), key),
            Err(port),
            "no MOVED to {port}"
        );
    }
    let mut shards = keys.into_iter();

    // Crash a master: its replica takes over, with the key.
    let (old, killed_key) = shards.next().unwrap();
    let replica = cluster.replica_of(old).unwrap().port();
    assert_eq!(cluster.kill_master_of_key(&killed_key), old);
    let killed = Instant::now();
    let new = cluster.wait_for_failover(old, Duration::from_secs(15));
    println!(
        "failover from {old} to {new} took {:?} after the kill",
        killed.elapsed()
    );
    assert_eq!(new, replica);
    assert_eq!(cluster.node_for_key(&killed_key).port(), new);
    assert_eq!(
        get(cluster.node_for_key(&killed_key), &killed_key),
        Ok(Some(format!("value of {killed_key}")))
    );
    assert!(!cluster.masters().iter().any(|m| m.port() == old));

    // A manual failover on another shard swaps master and replica.
    let (master, swapped_key) = shards.next().unwrap();
    let replica = cluster.replica_of(master).unwrap().port();
    let swapping = Instant::now();
    cluster.failover_replica(replica);
    println!(
        "manual failover from {master} to {replica} took {:?}",
        swapping.elapsed()
    );
    let node = |port| cluster.nodes().iter().find(|n| n.port() == port).unwrap();
    assert_eq!(role(node(replica)).as_deref(), Some("master"));
    assert_eq!(role(node(master)).as_deref(), Some("slave"));
    assert_eq!(
        cluster.replica_of(replica).map(RedisServer::port),
        Some(master)
    );
    assert_eq!(cluster.node_for_key(&swapped_key).port(), replica);
    assert_eq!(
        get(node(replica), &swapped_key),
        Ok(Some(format!("value of {swapped_key}")))
    );

    // The last shard's key moves, with its slot, to another master.
    let (from, moved_key) = shards.next().unwrap();
    let slot = cluster.key_slot(&moved_key);
    let to = cluster
        .masters()
        .iter()
        .map(|m| m.port())
        .find(|&p| p != from)
        .unwrap();
    // Another key in the same slot: its hash tag is the key itself.
    let _: () = cmd(
        cluster.node_for_key(&moved_key),
        &["SET", &format!("{{{moved_key}}}-2"), "x"],
    );
    assert_eq!(cluster.key_slot(&format!("{{{moved_key}}}-2")), slot);
    let migrating = Instant::now();
    cluster.migrate_slot(slot, to);
    println!(
        "slot {slot} moved from {from} to {to} in {:?}",
        migrating.elapsed()
    );
    assert_eq!(cluster.node_for_key(&moved_key).port(), to);
    assert_eq!(
        get(node(to), &moved_key),
        Ok(Some(format!("value of {moved_key}")))
    );
    assert_eq!(
        get(node(to), &format!("{{{moved_key}}}-2")),
        Ok(Some("x".to_owned()))
    );
    assert_eq!(get(node(from), &moved_key), Err(to));
    let left: Vec<String> = cmd(
        node(from),
        &["CLUSTER", "GETKEYSINSLOT", &slot.to_string(), "10"],
    );
    assert!(left.is_empty(), "{left:?} stayed on {from}");
    println!("whole test took {:?}", started.elapsed());
}
