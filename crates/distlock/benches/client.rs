//! Criterion benches of distlock's client-side costs, and of one acquire/release pair end to
//! end against a private redis-server (started by distlock-test).
//!
//! ```text
//! cargo bench -p distlock --bench client
//! ```
//!
//! The throughput and hand-off comparisons with other libraries live in `distlock-bench bench`
//! (doc/performance.md); these benches track the client's own work between changes.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use distlock::__bench;

fn commands(c: &mut Criterion) {
    let mut g = c.benchmark_group("build");
    g.bench_function("acquire invocation", |b| {
        b.iter(|| {
            black_box(__bench::acquire_invocation(
                black_box("orders:user:42"),
                black_box("0b8e6f4e-6b1c-4c39-9a55-2b8c1f6b7d10:17"),
            ))
        })
    });
    g.bench_function("release invocation", |b| {
        b.iter(|| {
            black_box(__bench::release_invocation(
                black_box("orders:user:42"),
                black_box("0b8e6f4e-6b1c-4c39-9a55-2b8c1f6b7d10:17"),
                black_box("redisson_unlock_latch:{orders:user:42}:0b8e6f4e:r18"),
            ))
        })
    });
    g.bench_function("wake channel name", |b| {
        b.iter(|| black_box(__bench::lock_channel(black_box("orders:user:42"))))
    });
    g.finish();

    let granted = redis::Value::Array(vec![
        redis::Value::Int(1),
        redis::Value::Int(1),
        redis::Value::Int(1_795_229_516_347_677),
    ]);
    let held = redis::Value::Array(vec![redis::Value::Int(0), redis::Value::Int(29_873)]);
    let mut g = c.benchmark_group("parse");
    g.bench_function("acquire reply: granted", |b| {
        b.iter(|| black_box(__bench::parse_acquire_reply(black_box(&granted))))
    });
    g.bench_function("acquire reply: held", |b| {
        b.iter(|| black_box(__bench::parse_acquire_reply(black_box(&held))))
    });
    g.bench_function("owner string", |b| {
        b.iter(|| {
            black_box(distlock::Owner::parse(black_box(
                "0b8e6f4e-6b1c-4c39-9a55-2b8c1f6b7d10:17",
            )))
        })
    });
    g.finish();

    c.bench_function("script registry: hash all scripts", |b| {
        b.iter(|| black_box(__bench::hash_all_scripts()))
    });
}

fn end_to_end(c: &mut Criterion) {
    let server = distlock_test::RedisServer::start();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let client = rt
        .block_on(distlock::Client::connect(&server.url()))
        .expect("connect");
    let lock = client.lock("bench:e2e");
    let mut g = c.benchmark_group("server");
    g.measurement_time(Duration::from_secs(5));
    g.bench_function("acquire + release (loopback)", |b| {
        b.to_async(&rt).iter(|| async {
            let guard = lock.try_acquire().await.expect("acquire").expect("free");
            guard.release().await.expect("release");
        })
    });
    g.finish();
}

criterion_group!(benches, commands, end_to_end);
criterion_main!(benches);
