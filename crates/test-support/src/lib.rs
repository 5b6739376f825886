//! Scaffolding shared by the workspace's tests (a dev-dependency only): a scripted HTTP
//! server ([`mock`]), fresh PostgreSQL databases ([`fresh_postgres`]) and the rule for
//! services a test needs: unreachable skips the test, except under `CI=true` where it fails it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod mock;
mod postgres;

use std::fmt::Display;

pub use postgres::{PG_ADMIN_URL, PgDatabase, fresh_postgres};

/// The RabbitMQ the tests use.
pub const AMQP_URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

/// `CI=true`: unreachable services fail tests instead of skipping them.
pub fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// The connection when `connected` succeeded; otherwise `None` after printing
/// `skipped: <service> unreachable at <url> (<error>)`, or a panic under `CI=true`.
#[track_caller]
pub fn reachable_or_skip<T, E: Display>(service: &str, url: &str, connected: Result<T, E>) -> Option<T> {
    match connected {
        Ok(c) => Some(c),
        Err(e) if !ci() => {
            eprintln!("skipped: {service} unreachable at {url} ({e})");
            None
        }
        Err(e) => panic!("{service} unreachable under CI=true: {e}"),
    }
}

/// [`reachable_or_skip`] for a connection to RabbitMQ at [`AMQP_URL`].
#[track_caller]
pub fn rabbit_or_skip<T, E: Display>(connected: Result<T, E>) -> Option<T> {
    reachable_or_skip("RabbitMQ", AMQP_URL, connected)
}
