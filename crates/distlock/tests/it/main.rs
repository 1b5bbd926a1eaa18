//! distlock's integration tests: every test runs against real `redis-server` processes
//! started by `distlock-test` on free loopback ports.

mod util;

mod acl;
mod bad_input;
mod blocking;
mod cancel;
mod cluster;
mod config;
mod fair;
mod faults;
mod fencing;
mod functions;
mod handoff;
mod hints;
mod holder;
mod inspect;
mod job;
mod kinds;
mod latch;
mod lock_basic;
mod lost;
mod metrics;
mod model;
mod multi;
mod observability;
mod outages;
mod permit_handoff;
mod processes;
mod redisson;
mod redlock;
mod review;
mod rw_handoff;
mod rwlock;
mod scan;
mod scripts;
mod semaphore;
mod send;
mod sentinel;
mod shutdown;
#[cfg(feature = "tls")]
mod tls;
mod topologies;
mod user_keys;
mod wakeup;
mod watchdog;
