//! End-to-end tests of the `distlock-bench` binary (the demo and the benchmark) against real
//! redis-server processes.

mod demo;
mod workloads;
