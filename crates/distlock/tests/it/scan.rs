//! `Client::scan`: bounded `SCAN` on the server, or on every master of a Cluster.

use std::collections::HashSet;

use crate::util::*;

/// Every match on one server, sorted; a small bound stops early and says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scan_finds_every_match_and_a_bound_stops_it() {
    let (server, client) = setup().await;
    let mut con = server.connection();
    let mut pipe = redis::pipe();
    for i in 0..3000 {
        pipe.cmd("SET").arg(format!("other:{i}")).arg(1).ignore();
    }
    for i in 0..50 {
        pipe.cmd("SET")
            .arg(format!("wanted:{i:02}"))
            .arg(1)
            .ignore();
    }
    let _: () = pipe.query(&mut con).unwrap();

    let all = client.scan("wanted:*", 1_000_000).await.unwrap();
    assert!(all.complete);
    let expected: Vec<String> = (0..50).map(|i| format!("wanted:{i:02}")).collect();
    assert_eq!(all.keys, expected);

    // One call of COUNT 1000 over 3,050 keys cannot reach the end.
    let partial = client.scan("*", 1).await.unwrap();
    assert!(!partial.complete);
    assert!(
        !partial.keys.is_empty() && partial.keys.len() < 3050,
        "{}",
        partial.keys.len()
    );
    // Glob escapes pass through.
    let _: () = redis::cmd("SET")
        .arg("odd*key")
        .arg(1)
        .query(&mut con)
        .unwrap();
    let odd = client.scan("odd\\*key", 1_000_000).await.unwrap();
    assert_eq!(odd.keys, vec!["odd*key".to_string()]);
}

/// On a Cluster the keys of every master are found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scan_covers_every_master_of_a_cluster() {
    let (deployment, client) = setup_on(Topology::Cluster).await;
    let names: Vec<String> = (0..30).map(|i| format!("scan-{i}")).collect();
    let mut guards = Vec::new();
    for n in &names {
        guards.push(client.lock(n.as_str()).acquire().await.unwrap());
    }
    let masters: HashSet<u16> = names
        .iter()
        .map(|n| deployment.node_for(n).port())
        .collect();
    assert!(
        masters.len() >= 2,
        "the names should spread over the masters"
    );
    let found = client.scan("scan-*", 1_000_000).await.unwrap();
    assert!(found.complete);
    let mut expected = names.clone();
    expected.sort();
    assert_eq!(found.keys, expected);
    for g in guards {
        g.release().await.unwrap();
    }
}
