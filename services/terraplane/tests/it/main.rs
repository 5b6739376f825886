//! End-to-end tests of Terraplane: real api, scheduler, runners and Terraform, on SQLite +
//! the in-process queue and on PostgreSQL + RabbitMQ.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod apikeys;
mod audit;
mod cli;
mod drift;
mod graphql;
mod harness;
mod isolation;
mod lifecycle;
mod notifications;
mod policies;
mod production;
mod rbac;
mod resilience;
mod roles;
mod secrets;
mod sessions;
mod sso;
mod state_backend;
