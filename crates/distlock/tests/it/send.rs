//! Every public future and guard is `Send` (and the handles and guards `Sync`), so they can
//! be held across `.await` in a task spawned on a multi-threaded runtime. Checked when this
//! file compiles, as tokio's `tests/async_send_sync.rs` does: a future that stopped being
//! `Send` fails the build of the test suite (no test function: the functions here are never
//! run, only type-checked).

#![allow(dead_code, unused_must_use, clippy::too_many_arguments)]

use std::time::Duration;

use distlock::Lease;
use distlock::{
    Client, ClientBuilder, CountDownLatch, FairLock, JobGuard, JobLock, LeasedPermit,
    LeasedSemaphore, Lock, LockGuard, MultiLock, MultiLockGuard, Owner, RedLock, RedLockGuard,
    RwLock, RwLockReadGuard, RwLockWriteGuard, Semaphore, SemaphorePermit,
};

fn send<T: Send>(_: &T) {}
fn send_sync<T: Send + Sync>() {}

/// The handles and guards themselves.
fn types() {
    send_sync::<Client>();
    send_sync::<ClientBuilder>();
    send_sync::<Lock>();
    send_sync::<FairLock>();
    send_sync::<RwLock>();
    send_sync::<Semaphore>();
    send_sync::<LeasedSemaphore>();
    send_sync::<CountDownLatch>();
    send_sync::<JobLock>();
    send_sync::<MultiLock>();
    send_sync::<RedLock>();
    send_sync::<distlock::RedLockNodes>();
    send_sync::<LockGuard>();
    send_sync::<distlock::FairLockGuard>();
    send_sync::<RwLockReadGuard>();
    send_sync::<RwLockWriteGuard>();
    send_sync::<SemaphorePermit>();
    send_sync::<LeasedPermit>();
    send_sync::<JobGuard>();
    send_sync::<MultiLockGuard>();
    send_sync::<RedLockGuard>();
}

fn client_futures(client: Client, builder: ClientBuilder) {
    send(&Client::connect("redis://127.0.0.1/"));
    send(&builder.build());
    send(&client.scan("*", 10));
    send(&client.shutdown());
}

fn lock_futures(lock: Lock, owner: Owner, guard: LockGuard) {
    let d = Duration::from_secs(1);
    send(&lock.acquire());
    send(&lock.try_acquire());
    send(&lock.try_acquire_for(d));
    send(&lock.acquire_as(&owner));
    send(&lock.try_acquire_as(&owner, d));
    send(&lock.is_locked());
    send(&lock.remaining());
    send(&lock.force_unlock());
    send(&lock.status());
    send(&guard.lost());
    send(&guard.reenter());
    send(&guard.is_held());
    send(&guard.remaining());
    send(&guard.extend(d));
    send(&lock.adopt(owner));
    send(&guard.release());
}

fn fair_and_rw_futures(
    fair: FairLock,
    fair_guard: distlock::FairLockGuard,
    rw: RwLock,
    read: RwLockReadGuard,
    write: RwLockWriteGuard,
) {
    let d = Duration::from_secs(1);
    send(&fair_guard.lost());
    send(&fair_guard.reenter());
    send(&fair_guard.extend(d));
    send(&fair_guard.release());
    send(&fair.acquire());
    send(&fair.try_acquire());
    send(&fair.try_acquire_for(d));
    send(&fair.is_locked());
    send(&fair.force_unlock());
    send(&fair.status());
    send(&rw.read());
    send(&rw.try_read());
    send(&rw.try_read_for(d));
    send(&rw.write());
    send(&rw.try_write());
    send(&rw.try_write_for(d));
    send(&rw.status());
    send(&rw.force_unlock());
    send(&read.lost());
    send(&read.is_held());
    send(&read.extend(d));
    send(&read.reenter());
    send(&write.reenter());
    send(&write.downgrade());
    send(&read.release());
    send(&write.release());
}

fn semaphore_futures(
    sem: Semaphore,
    leased: LeasedSemaphore,
    permit: SemaphorePermit,
    leased_permit: LeasedPermit,
) {
    let d = Duration::from_secs(1);
    send(&sem.try_set_permits(1));
    send(&sem.available_permits());
    send(&sem.add_permits(1));
    send(&sem.drain_permits());
    send(&sem.acquire());
    send(&sem.acquire_many(2));
    send(&sem.try_acquire());
    send(&sem.try_acquire_for(d));
    send(&sem.try_acquire_many_for(2, d));
    send(&leased.try_set_permits(1));
    send(&leased.add_permits(1));
    send(&leased.set_permits(1));
    send(&leased.total_permits());
    send(&leased.permits());
    send(&leased.available_permits());
    send(&leased.available_permits_signed());
    send(&leased.lease(d).acquire());
    send(&leased.lease(d).try_acquire());
    send(&leased_permit.lost());
    send(&leased_permit.extend(d));
    send(&permit.release());
    send(&leased_permit.release());
}

fn latch_and_job_futures(latch: CountDownLatch, job: JobLock, guard: JobGuard) {
    let d = Duration::from_secs(1);
    send(&latch.try_set_count(1));
    send(&latch.count_down());
    send(&latch.count());
    send(&latch.wait());
    send(&latch.wait_for(d));
    send(&latch.delete());
    send(&job.try_acquire());
    send(&job.try_acquire_for(d));
    send(&job.acquire());
    send(&job.run(async { 1 }));
    send(&job.run_with(|lease| async move {
        lease.lost().await;
    }));
    send(&job.status());
    send(&job.force_unlock());
    send(&guard.lost());
    send(&guard.extend(d));
    send(&guard.release());
}

fn multi_and_redlock_futures(
    multi: MultiLock,
    guard: MultiLockGuard,
    redlock: RedLock,
    red_guard: RedLockGuard,
) {
    let d = Duration::from_secs(1);
    send(&multi.acquire());
    send(&multi.try_acquire());
    send(&multi.try_acquire_for(d));
    send(&guard.reenter());
    send(&guard.extend(d));
    send(&guard.lost());
    send(&redlock.try_acquire());
    send(&redlock.try_acquire_for(d));
    send(&redlock.acquire());
    send(&redlock.status());
    send(&red_guard.lost());
    send(&red_guard.extend(d));
    send(&guard.release());
    send(&red_guard.release());
}
