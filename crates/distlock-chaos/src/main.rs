//! `distlock-chaos`: a fault suite for distlock. It starts real `redis-server` topologies,
//! runs workloads from several OS processes (this binary, spawned as workers), injects faults
//! on a schedule, records a Jepsen-style history and checks it offline.

// Removed once every part is wired up.
#![allow(dead_code)]

mod history;
mod proxy;
mod timeline;

fn main() {
    println!("distlock-chaos");
}
