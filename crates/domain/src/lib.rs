//! Terraplane's domain: identifiers, validated names, the run state machine and the pure
//! functions over Terraform documents (state, plan) that every other crate relies on.
//! No IO, no async, no database.

pub mod access;
pub mod clock;
pub mod drift;
pub mod ids;
pub mod mask;
pub mod notify;
pub mod plan;
pub mod run;
pub mod slug;
pub mod state;
pub mod vars;

pub use access::{Access, Role, SpaceNode};
pub use clock::{Clock, ManualClock, SystemClock};
pub use ids::*;
pub use run::{ReviewStage, RunEvent, RunPhase, RunState, RunType, TransitionError};
pub use slug::{Slug, SlugError};
