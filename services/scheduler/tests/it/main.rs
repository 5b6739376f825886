//! Scheduler tests: `Scheduler::tick` driven by hand with a manual clock, over a real store
//! (SQLite, and PostgreSQL when reachable) and the in-process queue.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod audit_delivery;
mod dispatch;
mod drift_firing;
mod expiry;
mod harness;
