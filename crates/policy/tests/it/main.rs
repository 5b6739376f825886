//! Behaviour of the policy engine through its public API: the product's fixture policies, the
//! example policies, compile errors, limits and the input builders.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod compile;
mod examples;
mod fixtures;
mod inputs;
mod limits;
mod support;
