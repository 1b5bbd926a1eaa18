//! Property test: random sequences of operations by three owners on one lock, against a
//! model of a reentrant lock (holder + hold count), on a real server.

use std::sync::OnceLock;

use distlock::{Client, ErrorKind, LockGuard};
use proptest::prelude::*;

use crate::util::*;

#[derive(Clone, Debug)]
enum Op {
    /// Owner i tries to take the lock (a fresh hold, or a re-entry when it holds it).
    Take(usize),
    /// Owner i releases its latest hold.
    Release(usize),
    /// Someone force-unlocks.
    Force,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..3usize).prop_map(Op::Take),
        4 => (0..3usize).prop_map(Op::Release),
        1 => Just(Op::Force),
    ]
}

struct Env {
    runtime: tokio::runtime::Runtime,
    _server: RedisServer,
    client: Client,
}

fn env() -> &'static Env {
    static ENV: OnceLock<Env> = OnceLock::new();
    ENV.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let server = RedisServer::start();
        let client = runtime.block_on(client_for(&server));
        Env {
            runtime,
            _server: server,
            client,
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn lock_behaves_like_the_model(ops in prop::collection::vec(op(), 1..25)) {
        let env = env();
        env.runtime.block_on(async {
            static CASE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let name = format!("model:{}", CASE.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
            let lock = env.client.lock(name);
            // Model: who holds the lock and how many holds.
            let mut holder: Option<(usize, u32)> = None;
            // Guards per owner, latest last.
            let mut guards: Vec<Vec<LockGuard>> = vec![Vec::new(), Vec::new(), Vec::new()];
            let mut last_token = 0u128;
            for op in ops {
                match op {
                    Op::Take(i) => {
                        let got = match guards[i].last() {
                            Some(g) => g.reenter().await.map(Some),
                            None => lock.try_acquire().await,
                        };
                        match holder {
                            Some((h, n)) if h == i => {
                                let g = got.expect("re-entry").expect("re-entry granted");
                                assert_eq!(g.hold_count(), n + 1);
                                holder = Some((i, n + 1));
                                guards[i].push(g);
                            }
                            Some(_) => {
                                match got {
                                    Ok(None) => {}
                                    Err(e) => assert_eq!(e.kind(), ErrorKind::NotHeld),
                                    Ok(Some(g)) => panic!("granted while held by another: {g:?}"),
                                }
                            }
                            None => match got {
                                Ok(Some(g)) => {
                                    assert_eq!(g.hold_count(), 1);
                                    assert!(g.fencing_token().get() > last_token);
                                    last_token = g.fencing_token().get();
                                    holder = Some((i, 1));
                                    for stale in guards[i].drain(..) {
                                        let _ = stale.forget();
                                    }
                                    guards[i].push(g);
                                }
                                // A stale guard's re-entry on a free lock is refused.
                                Err(e) => {
                                    assert_eq!(e.kind(), ErrorKind::NotHeld);
                                    for stale in guards[i].drain(..) {
                                        let _ = stale.forget();
                                    }
                                }
                                Ok(None) => panic!("free lock refused"),
                            },
                        }
                    }
                    Op::Release(i) => {
                        let Some(g) = guards[i].pop() else { continue };
                        let r = g.release().await;
                        match holder {
                            Some((h, n)) if h == i => {
                                r.expect("owner's release");
                                holder = if n > 1 { Some((i, n - 1)) } else { None };
                            }
                            _ => assert_eq!(r.unwrap_err().kind(), ErrorKind::NotHeld),
                        }
                    }
                    Op::Force => {
                        let was = lock.force_unlock().await.unwrap();
                        assert_eq!(was, holder.is_some());
                        holder = None;
                    }
                }
                let status = lock.status().await.unwrap();
                let expected: Vec<(String, u64)> = match holder {
                    Some((i, n)) => vec![(guards[i].last().unwrap().owner().to_string(), n as u64)],
                    None => vec![],
                };
                assert_eq!(status.holders, expected);
            }
            for g in guards.into_iter().flatten() {
                let _ = g.forget();
            }
            let was_held = lock.force_unlock().await.expect("force_unlock at the end of a case");
            assert_eq!(was_held, holder.is_some(), "the model's holder at the end");
        });
    }
}
