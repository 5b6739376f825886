//! Storage tests: every test runs on SQLite and on a fresh PostgreSQL database (skipped
//! when PostgreSQL is unreachable, except under `CI=true`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod audit;
mod encryption;
mod harness;
mod logs;
mod migrations;
mod policies;
mod runs;
mod stacks;
mod state;
mod tenant;
mod vars;
