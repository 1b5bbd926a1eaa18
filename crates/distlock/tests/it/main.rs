//! distlock's integration tests: every test runs against real `redis-server` processes
//! started by `distlock-harness` on free loopback ports.

mod util;

mod bad_input;
mod cancel;
mod faults;
mod fencing;
mod job;
mod lock_basic;
mod lost;
mod model;
mod multi;
mod processes;
mod redlock;
mod scripts;
mod tls;
mod wakeup;
mod watchdog;
