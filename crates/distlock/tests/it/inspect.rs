//! `Client::inspect` and `Client::inspect_job`: what a name holds, read from its key's
//! shape, one kind at a time on a standalone server.

use std::time::Duration;

use distlock::{kind, ErrorKind, InspectedKind, Inspection};

use crate::util::*;

const WAIT: Duration = Duration::from_secs(10);

/// Inspects `name` until `done` holds for the inspection (a waiter subscribes a moment after
/// its acquire starts); the last inspection.
async fn inspect_until(
    client: &distlock::Client,
    name: &str,
    done: impl Fn(&Inspection) -> bool,
) -> Inspection {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let i = client.inspect(name).await.unwrap();
        if done(&i) || tokio::time::Instant::now() > deadline {
            return i;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A name with no key is free, with the fencing counter its grants will draw from.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_without_a_key_is_free_with_its_fencing_counter() {
    let (_server, client) = setup().await;
    drop(
        client
            .lock("orders")
            .acquire()
            .await
            .unwrap()
            .release()
            .await,
    );
    let i = client.inspect("orders").await.unwrap();
    let InspectedKind::Free(s) = &i.kind else {
        panic!("{i:?}");
    };
    assert!(s.fencing_counter > 0, "{i:?}");
    assert_eq!(i.kind.as_str(), kind::LOCK, "a free name reads as a lock");
    assert_eq!((i.key.as_str(), i.ttl, i.waiters), ("orders", None, 0));
    assert!(!i.is_held());
}

/// A held plain lock: its owner and hold count, who was granted it, its token and TTL; a
/// second client's waiter counts (queued: the hash's queued field is no owner).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_lock_has_its_owner_holder_token_ttl_and_waiters() {
    let (server, client) = setup().await;
    let guard = client.lock("orders").acquire().await.unwrap();
    let _again = guard.reenter().await.unwrap();
    let other = client_for(&server).await;
    let waiter = tokio::spawn(async move { other.lock("orders").acquire().await });
    let queued = ["HEXISTS", "orders", distlock::layout::QUEUED_FIELD];
    assert!(eventually(WAIT, || cmd::<bool>(&server, &queued)).await);
    let i = inspect_until(&client, "orders", |i| i.waiters == 1).await;
    let InspectedKind::Lock(s) = &i.kind else {
        panic!("{i:?}");
    };
    assert_eq!(i.kind.as_str(), kind::LOCK);
    assert_eq!(s.holders, vec![(guard.owner().as_str().to_string(), 2)]);
    assert_eq!(s.fencing_token, Some(guard.fencing_token()));
    assert!(s.holder.is_some(), "{i:?}");
    assert!(i.ttl.is_some_and(|t| t <= Duration::from_secs(30)), "{i:?}");
    assert_eq!(i.waiters, 1, "{i:?}");
    assert!(i.is_held());
    waiter.abort();
}

/// A fair lock with a waiter in its queue is a fair lock, its queue the waiting owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_lock_with_a_waiter_shows_its_queue() {
    let (server, client) = setup().await;
    let _guard = client.fair_lock("fifo").acquire().await.unwrap();
    let other = client_for(&server).await;
    let waiter = tokio::spawn(async move { other.fair_lock("fifo").acquire().await });
    let i = inspect_until(
        &client,
        "fifo",
        |i| matches!(&i.kind, InspectedKind::FairLock(s) if s.queue.len() == 1),
    )
    .await;
    let InspectedKind::FairLock(s) = &i.kind else {
        panic!("{i:?}");
    };
    assert_eq!(i.kind.as_str(), kind::FAIR_LOCK);
    assert_eq!(s.queue.len(), 1, "{i:?}");
    assert!(i.waiters >= 1, "{i:?}");
    waiter.abort();
}

/// A read-write lock: its mode, its waiting writers, and its waiters on its own channel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rw_lock_has_its_mode_and_its_waiting_writer() {
    let (server, client) = setup().await;
    let _read = client.rw_lock("doc").read().await.unwrap();
    let other = client_for(&server).await;
    let writer = tokio::spawn(async move { other.rw_lock("doc").write().await });
    let i = inspect_until(&client, "doc", |i| {
        matches!(&i.kind, InspectedKind::RwLock(s) if s.waiting_writers == 1) && i.waiters == 1
    })
    .await;
    let InspectedKind::RwLock(s) = &i.kind else {
        panic!("{i:?}");
    };
    assert_eq!(s.mode, Some(distlock::LockMode::Read), "{i:?}");
    assert_eq!(i.kind.as_str(), kind::READ_LOCK, "named by the side held");
    assert_eq!((s.waiting_writers, s.holders.len()), (1, 1), "{i:?}");
    assert_eq!(i.waiters, 1, "{i:?}");
    writer.abort();
    let _write = client.rw_lock("doc-w").write().await.unwrap();
    let i = client.inspect("doc-w").await.unwrap();
    assert_eq!(i.kind.as_str(), kind::WRITE_LOCK, "{i:?}");
}

/// Integer strings: a semaphore and a latch by the waiter on their channel, a leased
/// semaphore by its leases, and one with nothing to tell.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphores_and_latches_are_told_apart_by_waiters_and_leases() {
    let (server, client) = setup().await;
    assert!(client.semaphore("pool").try_set_permits(1).await.unwrap());
    let _taken = client.semaphore("pool").acquire().await.unwrap();
    assert!(client
        .count_down_latch("batch")
        .try_set_count(3)
        .await
        .unwrap());
    let leased = client.leased_semaphore("exports");
    assert!(leased.try_set_permits(2).await.unwrap());
    let _permit = leased
        .lease(Duration::from_secs(60))
        .acquire()
        .await
        .unwrap();
    assert!(client.semaphore("idle").try_set_permits(4).await.unwrap());

    let i = client.inspect("idle").await.unwrap();
    assert_eq!(
        i.kind,
        InspectedKind::SemaphoreOrLatch { value: 4 },
        "{i:?}"
    );
    assert_eq!(i.kind.as_str(), kind::SEMAPHORE_OR_LATCH);
    let i = client.inspect("exports").await.unwrap();
    assert_eq!(
        i.kind,
        InspectedKind::LeasedSemaphore {
            permits: 1,
            leased: 1
        },
        "{i:?}"
    );
    assert!(i.is_held());
    assert_eq!(i.kind.as_str(), kind::LEASED_SEMAPHORE);

    let other = client_for(&server).await;
    let sem_waiter = tokio::spawn({
        let other = other.clone();
        async move { other.semaphore("pool").acquire().await }
    });
    let latch_waiter = tokio::spawn(async move { other.count_down_latch("batch").wait().await });
    let i = inspect_until(&client, "pool", |i| i.waiters == 1).await;
    assert_eq!(i.kind, InspectedKind::Semaphore { permits: 0 }, "{i:?}");
    assert_eq!(i.kind.as_str(), kind::SEMAPHORE);
    assert_eq!(i.waiters, 1);
    let i = inspect_until(&client, "batch", |i| i.waiters == 1).await;
    assert_eq!(i.kind, InspectedKind::Latch { count: 3 }, "{i:?}");
    assert_eq!(i.kind.as_str(), kind::LATCH);
    assert_eq!(i.waiters, 1);
    sem_waiter.abort();
    latch_waiter.abort();
}

/// A job lock, by its key's name or by environment and name, held and free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_lock_is_read_by_its_key_or_its_environment_and_name() {
    let (_server, client) = setup().await;
    let job = client
        .job_lock("report")
        .environment("prod")
        .at_most_for(Duration::from_secs(60));
    let _guard = job.try_acquire().await.unwrap().expect("free");
    let by_key = client.inspect("job-lock:prod:report").await.unwrap();
    let by_name = client.inspect_job("prod", "report").await.unwrap();
    assert_eq!((&by_key.name, &by_key.key), (&by_name.name, &by_name.key));
    assert_eq!(by_key.waiters, 0);
    assert_eq!(by_key.kind.as_str(), kind::JOB_LOCK);
    let InspectedKind::Job { env, name, holder } = &by_key.kind else {
        panic!("{by_key:?}");
    };
    assert_eq!((env.as_str(), name.as_str()), ("prod", "report"));
    assert_eq!(
        holder.as_ref().map(|h| &h.value),
        match &by_name.kind {
            InspectedKind::Job { holder, .. } => holder.as_ref().map(|h| &h.value),
            _ => None,
        },
        "{by_key:?} / {by_name:?}"
    );
    assert!(holder.is_some(), "{by_key:?}");
    assert!(by_key.ttl.is_some_and(|t| t <= Duration::from_secs(60)));
    assert_eq!(by_key.key, "job-lock:prod:report");

    let free = client.inspect_job("staging", "report").await.unwrap();
    assert!(
        matches!(&free.kind, InspectedKind::Job { holder: None, env, .. } if env == "staging"),
        "{free:?}"
    );
    assert!(!free.is_held());
}

/// Keys of other shapes are refused as the wrong type, naming the type.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_of_other_shapes_are_the_wrong_type() {
    let (server, client) = setup().await;
    let _: () = cmd(&server, &["RPUSH", "a-list", "x"]);
    let _: () = cmd(&server, &["HSET", "a-hash", "field", "1"]);
    let _: () = cmd(&server, &["SET", "a-string", "hello"]);
    let _: () = cmd(&server, &["SET", "negative", "-3"]);
    for (name, redis_type) in [
        ("a-list", "list"),
        ("a-hash", "hash"),
        ("a-string", "string"),
        ("negative", "string"),
    ] {
        let e = client.inspect(name).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::WrongType, "{name}: {e}");
        assert_eq!(
            e.to_string(),
            format!("the key holds a {redis_type} that is not a lock, a semaphore or a latch")
        );
    }
    assert_eq!(
        client.inspect("").await.unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
}
