//! RabbitMQ tests against a real broker, each with its own name prefix and topology that
//! it deletes at the end. Skipped when the broker is unreachable, except under `CI=true`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod harness;
mod rabbit;
