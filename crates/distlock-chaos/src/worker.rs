//! A worker: one OS process (this binary, spawned by the orchestrator) running a workload's
//! tasks against the deployment and recording every operation in its history file.
//!
//! Protocol with the orchestrator: the worker prints `client <uuid>` when it is connected,
//! `done` when its tasks have stopped, then waits for its stdin to close before it shuts its
//! client down (so the orchestrator can look for orphans while the clients are still up).

use std::future::Future;
use std::io::BufRead as _;
use std::path::PathBuf;
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use rand::RngExt as _;
use serde::{Deserialize, Serialize};

use crate::history::{Event, Mode, Op, Recorder, Type};
use crate::resource::Resource;

/// What the tasks do with each grant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    /// Plain lock; each grant: fenced read, sleep 0..hold, fenced write of value + 1.
    LockSet,
    /// The same with the fair (FIFO) lock.
    FairSet,
    /// Plain lock; each grant: unguarded `GET`, sleep, `SET` + 1 of the counter.
    Counter,
    /// Read-write lock: 3 in 4 grants are read holds (sleep), 1 in 4 write holds (lock-set).
    RwLock,
    /// Semaphore with `permits` permits: each grant sleeps; holders must never exceed it.
    Semaphore,
    /// Leased semaphore (direct hand-off on) with `permits` permits, each granted for the
    /// lease: each grant sleeps; holders must never exceed it.
    LeasedSemaphore,
    /// Job lock: every task tries at every tick of `job_interval`; runs of three shapes
    /// (an overrun of `at_most_for`, a run past the next tick, a short one).
    Job,
    /// Every kind the watchdog renews ([`RENEWED_KINDS`]), each task in turn, each hold two
    /// to three leases long: the renewals must keep them all.
    Watchdog,
    /// RedLock over independent masters; each grant: the counter increment.
    RedLock,
}

/// The kinds of hold the watchdog workload takes, in turn: what the watchdog renews.
pub const RENEWED_KINDS: &[&str] = &[
    "plain",
    "fair",
    "read",
    "write",
    "reentered-write",
    "multi",
    "leased-permit",
    "job",
];

/// Everything a worker needs, passed as one JSON argument.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Spec {
    /// The process's name in the history (`w0`, …).
    pub process: String,
    /// The deployment's URL (a server, a `redis-sentinel://` URL or a Cluster node).
    pub url: String,
    /// RedLock's masters.
    pub redlock_urls: Vec<String>,
    /// The fenced resource's server.
    pub resource_url: String,
    /// The workload.
    pub workload: Workload,
    /// The lock's name.
    pub key: String,
    /// Tasks in this process.
    pub tasks: u32,
    /// Stop after this many grants in this process (0: only the duration stops it).
    pub grants: u64,
    /// Stop after this long, ms.
    pub duration_ms: u64,
    /// The watchdog lease, ms.
    pub lease_ms: u64,
    /// How long one acquire waits before it gives up (and is invoked again), ms.
    pub wait_ms: u64,
    /// The longest sleep within a hold, ms.
    pub hold_max_ms: u64,
    /// `replica_acks`: 0 turns `WAIT` off.
    pub replica_acks: u32,
    /// Semaphore permits.
    pub permits: u32,
    /// The job's schedule, ms.
    pub job_interval_ms: u64,
    /// Where the history goes.
    pub history: PathBuf,
}

/// Run a worker to the end of its protocol.
pub fn main(spec: Spec) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(run(spec))
}

async fn run(spec: Spec) -> anyhow::Result<()> {
    let spec = Arc::new(spec);
    let rec = Recorder::create(&spec.history, &spec.process)
        .with_context(|| format!("cannot write {}", spec.history.display()))?;
    let client = distlock::Client::builder()
        .url(spec.url.clone())
        .app_name(format!("chaos-{}", spec.process))
        .watchdog_lease(Duration::from_millis(spec.lease_ms))
        .replica_acks(spec.replica_acks)
        .command_timeout(Duration::from_millis(spec.lease_ms.clamp(500, 2000)))
        .connect_timeout(Duration::from_millis(1000))
        .build()
        .await
        .context("the worker cannot connect")?;
    let redlock = if spec.workload == Workload::RedLock {
        Some(Arc::new(
            distlock::RedLockNodes::builder_from_urls(spec.redlock_urls.clone())
                .ttl(Duration::from_millis(spec.lease_ms))
                .node_timeout(Duration::from_millis(100))
                .build()
                .await
                .context("the worker cannot build its RedLock")?,
        ))
    } else {
        None
    };
    let resource = Resource::connect(&spec.resource_url).await?;
    println!("client {}", client.id());

    let deadline = Instant::now() + Duration::from_millis(spec.duration_ms);
    let granted = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for task in 0..spec.tasks {
        let t = Task {
            spec: spec.clone(),
            rec: rec.clone(),
            client: client.clone(),
            redlock: redlock.clone(),
            resource: resource.clone(),
            task,
            deadline,
            granted: granted.clone(),
        };
        tasks.push(tokio::spawn(t.run()));
    }
    for t in tasks {
        t.await.context("a task panicked")?;
    }
    rec.flush()?;
    println!("done");

    // Wait for the orchestrator to have looked for orphans.
    tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        while std::io::stdin().lock().read_line(&mut line).unwrap_or(0) > 0 {
            line.clear();
        }
    })
    .await?;
    let _ = client.shutdown().await;
    Ok(())
}

struct Task {
    spec: Arc<Spec>,
    rec: Recorder,
    client: distlock::Client,
    redlock: Option<Arc<distlock::RedLockNodes>>,
    resource: Resource,
    task: u32,
    deadline: Instant,
    granted: Arc<AtomicU64>,
}

impl Task {
    fn stop(&self) -> bool {
        Instant::now() >= self.deadline
            || (self.spec.grants > 0 && self.granted.load(Ordering::Relaxed) >= self.spec.grants)
    }

    fn by(&self) -> String {
        format!("{}/{}", self.spec.process, self.task)
    }

    fn hold_time(&self) -> Duration {
        Duration::from_millis(rand::rng().random_range(0..=self.spec.hold_max_ms))
    }

    async fn run(self) {
        let wait = Duration::from_millis(self.spec.wait_ms);
        let key = self.spec.key.clone();
        // The watchdog workload's next kind: the tasks start on different ones.
        let first: usize = self
            .spec
            .process
            .trim_start_matches('w')
            .parse()
            .unwrap_or(0);
        let mut turn = first * self.spec.tasks as usize + self.task as usize;
        while !self.stop() {
            match self.spec.workload {
                Workload::LockSet | Workload::Counter => {
                    let lock = self.client.lock(key.as_str());
                    self.cycle(Mode::Exclusive, lock.try_acquire_for(wait), |g| {
                        (g.fencing_token().get(), g.owner().as_str().to_owned())
                    })
                    .await;
                }
                Workload::FairSet => {
                    let lock = self.client.fair_lock(key.as_str());
                    self.cycle(Mode::Exclusive, lock.try_acquire_for(wait), |g| {
                        (g.fencing_token().get(), g.owner().as_str().to_owned())
                    })
                    .await;
                }
                Workload::RwLock => {
                    let lock = self.client.rw_lock(key.as_str());
                    if rand::rng().random_ratio(3, 4) {
                        self.cycle(Mode::Shared, lock.try_read_for(wait), |g| {
                            (g.fencing_token().get(), g.owner().as_str().to_owned())
                        })
                        .await;
                    } else {
                        self.cycle(Mode::Exclusive, lock.try_write_for(wait), |g| {
                            (g.fencing_token().get(), g.owner().as_str().to_owned())
                        })
                        .await;
                    }
                }
                Workload::Semaphore => self.semaphore(wait).await,
                Workload::LeasedSemaphore => self.leased_semaphore(wait).await,
                Workload::Job => self.job().await,
                Workload::Watchdog => {
                    self.renewed(RENEWED_KINDS[turn % RENEWED_KINDS.len()], wait)
                        .await;
                    turn += 1;
                }
                Workload::RedLock => {
                    let redlock = self.redlock.clone().expect("built for this workload");
                    self.cycle(
                        Mode::Exclusive,
                        redlock.lock(key.as_str()).try_acquire_for(wait),
                        |g| (0, g.owner().as_str().to_owned()),
                    )
                    .await;
                }
            }
        }
    }

    /// An event of this task on the lock, now.
    fn ev(&self, ty: Type, f: Op) -> Event {
        self.ev_on(&self.spec.key, ty, f)
    }

    /// An event of this task on the lock `key`, now.
    fn ev_on(&self, key: &str, ty: Type, f: Op) -> Event {
        self.rec.event(self.task, ty, f).key(key)
    }

    /// Record the acquire's `invoke`, await it, and record a timeout (`fail`, with
    /// `none_detail`) or an error (`fail` when the grant was given back unreplicated, `info`
    /// otherwise, then a 50 ms pause). The grant's `ok` is the caller's to record.
    async fn attempt<G>(
        &self,
        acquire: impl Future<Output = distlock::Result<Option<G>>>,
        none_detail: &str,
    ) -> Option<G> {
        self.attempt_on(&self.spec.key, acquire, none_detail).await
    }

    /// [`attempt`](Self::attempt) on the lock `key`.
    async fn attempt_on<G>(
        &self,
        key: &str,
        acquire: impl Future<Output = distlock::Result<Option<G>>>,
        none_detail: &str,
    ) -> Option<G> {
        let ev = |ty, f| self.ev_on(key, ty, f);
        self.rec.record(&ev(Type::Invoke, Op::Acquire));
        match acquire.await {
            Ok(Some(g)) => {
                self.granted.fetch_add(1, Ordering::Relaxed);
                Some(g)
            }
            Ok(None) => {
                self.rec
                    .record(&ev(Type::Fail, Op::Acquire).detail(none_detail));
                None
            }
            Err(e) => {
                let ty = if e.kind() == distlock::ErrorKind::NotReplicated {
                    Type::Fail
                } else {
                    Type::Info
                };
                self.rec.record(&ev(ty, Op::Acquire).detail(e.to_string()));
                tokio::time::sleep(Duration::from_millis(50)).await;
                None
            }
        }
    }

    /// Record the release's `invoke`, await it, and record its outcome. A release that finds
    /// the lock not held is how a holder learns that the lease was gone (a server that
    /// restarted without the lock): unless `lost` was already reported, the loss is.
    async fn release<T>(&self, release: impl Future<Output = distlock::Result<T>>, lost: bool) {
        self.release_on(&self.spec.key, release, lost).await;
    }

    /// [`release`](Self::release) on the lock `key`.
    async fn release_on<T>(
        &self,
        key: &str,
        release: impl Future<Output = distlock::Result<T>>,
        lost: bool,
    ) {
        let ev = |ty, f| self.ev_on(key, ty, f);
        self.rec.record(&ev(Type::Invoke, Op::Release));
        let e = match release.await {
            Ok(_) => ev(Type::Ok, Op::Release),
            Err(e) if e.kind() == distlock::ErrorKind::NotHeld => {
                if !lost {
                    self.rec.record(
                        &ev(Type::Ok, Op::Lost).detail("the release found the lock not held"),
                    );
                }
                ev(Type::Fail, Op::Release).detail(e.to_string())
            }
            Err(e) => ev(Type::Info, Op::Release).detail(e.to_string()),
        };
        self.rec.record(&e);
    }

    /// Hold `guard` for `time`, recording its loss (on `key`) when the client reports it;
    /// whether it was lost.
    async fn hold_for<G: distlock::Lease>(&self, key: &str, guard: &G, time: Duration) -> bool {
        let mut sleep = pin!(tokio::time::sleep(time));
        let mut lost = false;
        loop {
            tokio::select! {
                () = guard.lost(), if !lost => {
                    lost = true;
                    self.rec.record(&self.ev_on(key, Type::Ok, Op::Lost));
                }
                () = &mut sleep => break,
            }
        }
        if !lost && guard.is_lost() {
            lost = true;
            self.rec.record(&self.ev_on(key, Type::Ok, Op::Lost));
        }
        lost
    }

    /// One acquire, and with a grant the workload's work and the release.
    async fn cycle<G: distlock::Lease + distlock::Release<Released = ()>>(
        &self,
        mode: Mode,
        acquire: impl Future<Output = distlock::Result<Option<G>>>,
        grant: impl FnOnce(&G) -> (u128, String),
    ) {
        let Some(guard) = self.attempt(acquire, "timed out").await else {
            return;
        };
        let (token, owner) = grant(&guard);
        let mut ok = self.ev(Type::Ok, Op::Acquire).owner(&owner).mode(mode);
        if token != 0 {
            ok = ok.token(token);
        }
        self.rec.record(&ok);

        // The work runs to its end even when the lease is lost (as a holder that does not
        // look would): fencing must refuse what it writes late.
        let mut work = pin!(self.work(mode, token));
        let mut lost = false;
        loop {
            tokio::select! {
                () = guard.lost(), if !lost => {
                    lost = true;
                    self.rec.record(&self.ev(Type::Ok, Op::Lost));
                }
                () = &mut work => break,
            }
        }
        if !lost && guard.is_lost() {
            lost = true;
            self.rec.record(&self.ev(Type::Ok, Op::Lost));
        }
        self.release(guard.release(), lost).await;
    }

    /// What a grant does.
    async fn work(&self, mode: Mode, token: u128) {
        match (self.spec.workload, mode) {
            (Workload::Counter | Workload::RedLock, _) => self.increment().await,
            (_, Mode::Shared) => tokio::time::sleep(self.hold_time()).await,
            _ => self.fenced_increment(token).await,
        }
    }

    /// Fenced read, sleep, fenced write of value + 1.
    async fn fenced_increment(&self, token: u128) {
        let by = self.by();
        self.rec
            .record(&self.ev(Type::Invoke, Op::Read).token(token));
        let value = match self.resource.read(token, &by).await {
            Ok((true, v)) => {
                self.rec.record(&self.ev(Type::Ok, Op::Read).value(v));
                v
            }
            Ok((false, _)) => {
                self.rec
                    .record(&self.ev(Type::Fail, Op::Read).detail("refused: stale token"));
                return;
            }
            Err(e) => {
                self.rec
                    .record(&self.ev(Type::Info, Op::Read).detail(e.to_string()));
                return;
            }
        };
        tokio::time::sleep(self.hold_time()).await;
        let new = value + 1;
        self.rec
            .record(&self.ev(Type::Invoke, Op::Write).token(token).value(new));
        let e = match self.resource.write(token, &by, new).await {
            Ok((true, _)) => self.ev(Type::Ok, Op::Write),
            Ok((false, _)) => self
                .ev(Type::Fail, Op::Write)
                .detail("refused: stale token"),
            Err(e) => self.ev(Type::Info, Op::Write).detail(e.to_string()),
        };
        self.rec.record(&e.value(new));
    }

    /// Unguarded GET, sleep, SET + 1.
    async fn increment(&self) {
        self.rec.record(&self.ev(Type::Invoke, Op::Increment));
        let result = async {
            let v = self.resource.counter().await?;
            tokio::time::sleep(self.hold_time()).await;
            self.resource.set_counter(v + 1).await?;
            Ok::<_, redis::RedisError>(v + 1)
        }
        .await;
        let e = match result {
            Ok(v) => self.ev(Type::Ok, Op::Increment).value(v),
            Err(e) => self.ev(Type::Info, Op::Increment).detail(e.to_string()),
        };
        self.rec.record(&e);
    }

    /// A permit: holders never exceed the permits (no lease, so no loss).
    async fn semaphore(&self, wait: Duration) {
        let sem = self.client.semaphore(self.spec.key.as_str());
        let Some(permit) = self.attempt(sem.try_acquire_for(wait), "timed out").await else {
            return;
        };
        self.rec
            .record(&self.ev(Type::Ok, Op::Acquire).mode(Mode::Shared));
        tokio::time::sleep(self.hold_time()).await;
        self.release(permit.release(), false).await;
    }

    /// A leased permit (for the lease, which the holds stay well within): holders never
    /// exceed the permits, whether a permit came by an attempt or by a hand-off whose
    /// message a killed subscription lost.
    async fn leased_semaphore(&self, wait: Duration) {
        let sem = self.client.leased_semaphore(self.spec.key.as_str());
        let lease = Duration::from_millis(self.spec.lease_ms);
        let Some(permit) = self
            .attempt(sem.lease(lease).try_acquire_for(wait), "timed out")
            .await
        else {
            return;
        };
        self.rec.record(
            &self
                .ev(Type::Ok, Op::Acquire)
                .owner(permit.id())
                .mode(Mode::Shared),
        );
        tokio::time::sleep(self.hold_time()).await;
        self.release(permit.release(), false).await;
    }

    /// One try at the next tick of the job's schedule; a run records its tick as `value`
    /// and its `at_most_for` as its lease. Every task agrees on a tick's shape of run, by the
    /// tick's number, in a cycle of four:
    /// - 0, an overrun: `at_most_for` 0.6 interval, a run of 1.6: its lock runs out while
    ///   it runs, the next tick's run takes it, and the overrun's release, made during that
    ///   run, must leave that run's lock alone (it compares the value);
    /// - 1, a long run: 1.5 intervals (`at_most_for` 10): at the next tick it still holds
    ///   the lock, and the others must find it held;
    /// - 2 and 3, a short run: a quarter interval, the lock kept (`at_least_for`) for 0.8.
    async fn job(&self) {
        let interval = self.spec.job_interval_ms * 1000;
        let now = crate::history::now_us();
        let tick = now / interval + 1;
        let at = tick * interval;
        tokio::time::sleep(Duration::from_micros(at - now)).await;
        if self.stop() {
            return;
        }
        let interval = Duration::from_millis(self.spec.job_interval_ms);
        let (at_most_for, at_least_for, run) = match tick % 4 {
            0 => (interval * 3 / 5, Duration::ZERO, interval * 8 / 5),
            1 => (interval * 10, Duration::ZERO, interval * 3 / 2),
            _ => (interval * 10, interval * 4 / 5, interval / 4),
        };
        let job = self
            .client
            .job_lock(self.spec.key.as_str())
            .at_most_for(at_most_for)
            .at_least_for(at_least_for);
        let Some(guard) = self
            .attempt(job.try_acquire(), "another run holds it")
            .await
        else {
            return;
        };
        self.rec.record(
            &self
                .ev(Type::Ok, Op::Acquire)
                .value(tick as i64)
                .lease(at_most_for),
        );
        let lost = self.hold_for(&self.spec.key, &guard, run).await;
        self.release(guard.release(), lost).await;
    }

    /// One hold of `kind` (one of [`RENEWED_KINDS`]) on a lock of its own, two to three
    /// leases long (a job lock's `at_most_for` is the lease): without renewals every kind's
    /// lease would run out during it.
    async fn renewed(&self, kind: &str, wait: Duration) {
        let lease = Duration::from_millis(self.spec.lease_ms);
        let time =
            lease * 2 + Duration::from_millis(rand::rng().random_range(0..=self.spec.lease_ms));
        let key = format!("{}:{kind}", self.spec.key);
        let c = &self.client;
        let token = |t: distlock::FencingToken| Some(t.get());
        match kind {
            "plain" => {
                let lock = c.lock(key.as_str());
                let acquire = lock.try_acquire_for(wait);
                self.renewed_hold(
                    kind,
                    &key,
                    Mode::Exclusive,
                    acquire,
                    |g| token(g.fencing_token()),
                    time,
                )
                .await;
            }
            "fair" => {
                let lock = c.fair_lock(key.as_str());
                let acquire = lock.try_acquire_for(wait);
                self.renewed_hold(
                    kind,
                    &key,
                    Mode::Exclusive,
                    acquire,
                    |g| token(g.fencing_token()),
                    time,
                )
                .await;
            }
            "read" => {
                let lock = c.rw_lock(key.as_str());
                let acquire = lock.try_read_for(wait);
                self.renewed_hold(
                    kind,
                    &key,
                    Mode::Shared,
                    acquire,
                    |g| token(g.fencing_token()),
                    time,
                )
                .await;
            }
            "write" => {
                let lock = c.rw_lock(key.as_str());
                let acquire = lock.try_write_for(wait);
                self.renewed_hold(
                    kind,
                    &key,
                    Mode::Exclusive,
                    acquire,
                    |g| token(g.fencing_token()),
                    time,
                )
                .await;
            }
            "reentered-write" => {
                let lock = c.rw_lock(key.as_str());
                let Some(outer) = self
                    .attempt_on(&key, lock.try_write_for(wait), "timed out")
                    .await
                else {
                    return;
                };
                let inner = match outer.reenter().await {
                    Ok(g) => g,
                    Err(e) => {
                        self.rec.record(
                            &self
                                .ev_on(&key, Type::Info, Op::Acquire)
                                .detail(format!("re-entering: {e}")),
                        );
                        let _ = outer.release().await;
                        return;
                    }
                };
                self.record_grant(kind, &key, Mode::Exclusive, token(inner.fencing_token()));
                // The re-entered hold is watched; its release leaves the outer one, whose
                // release frees the lock.
                let lost = self.hold_for(&key, &inner, time).await;
                self.release_on(&key, inner.release(), lost).await;
                if let Err(e) = outer.release().await {
                    self.rec.record(
                        &self
                            .ev_on(&key, Type::Info, Op::Release)
                            .detail(format!("the outer write hold's release: {e}")),
                    );
                }
            }
            "multi" => {
                let members = [
                    c.lock(format!("{key}:m1").as_str()),
                    c.lock(format!("{key}:m2").as_str()),
                ];
                let multi = distlock::MultiLock::new(members).expect("two distinct members");
                let acquire = multi.try_acquire_for(wait);
                self.renewed_hold(kind, &key, Mode::Exclusive, acquire, |_| None, time)
                    .await;
            }
            "leased-permit" => {
                let sem = c.leased_semaphore(key.as_str()).lease(lease);
                let Some(mut permit) = self
                    .attempt_on(&key, sem.try_acquire_for(wait), "timed out")
                    .await
                else {
                    return;
                };
                if let Err(e) = permit.keep_alive(lease) {
                    self.rec.record(
                        &self
                            .ev_on(&key, Type::Info, Op::Acquire)
                            .detail(format!("keep-alive: {e}")),
                    );
                    let _ = permit.release().await;
                    return;
                }
                self.record_grant(kind, &key, Mode::Exclusive, None);
                let lost = self.hold_for(&key, &permit, time).await;
                self.release_on(&key, permit.release(), lost).await;
            }
            "job" => {
                let job = c.job_lock(key.as_str()).at_most_for(lease).keep_alive();
                let acquire = job.try_acquire_for(wait);
                self.renewed_hold(kind, &key, Mode::Exclusive, acquire, |_| None, time)
                    .await;
            }
            other => unreachable!("no kind {other}"),
        }
    }

    /// Record a grant of `kind` on `key`.
    fn record_grant(&self, kind: &str, key: &str, mode: Mode, token: Option<u128>) {
        let mut ok = self.ev_on(key, Type::Ok, Op::Acquire).mode(mode).kind(kind);
        if let Some(t) = token {
            ok = ok.token(t);
        }
        self.rec.record(&ok);
    }

    /// Acquire, record the grant of `kind`, hold it for `time` and release it.
    async fn renewed_hold<G: distlock::Lease + distlock::Release<Released = ()>>(
        &self,
        kind: &str,
        key: &str,
        mode: Mode,
        acquire: impl Future<Output = distlock::Result<Option<G>>>,
        token: impl FnOnce(&G) -> Option<u128>,
        time: Duration,
    ) {
        let Some(guard) = self.attempt_on(key, acquire, "timed out").await else {
            return;
        };
        self.record_grant(kind, key, mode, token(&guard));
        let lost = self.hold_for(key, &guard, time).await;
        self.release_on(key, guard.release(), lost).await;
    }
}
