//! The GraphQL schema is an interface: its SDL is kept in `docs/schema.graphql`, and this
//! test fails when the code and that file disagree. `UPDATE_SCHEMA=1 cargo test -p
//! terraplane-api --test schema` rewrites the file after an intended change.

use async_graphql::Schema;
use terraplane_api::graphql::{Mutation, Query, SubscriptionRoot};

#[test]
fn schema_matches_the_committed_sdl() {
    let sdl = Schema::build(Query::default(), Mutation::default(), SubscriptionRoot)
        .finish()
        .sdl();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/schema.graphql");
    if std::env::var_os("UPDATE_SCHEMA").is_some() {
        std::fs::write(&path, &sdl).expect("write docs/schema.graphql");
    }
    let committed = std::fs::read_to_string(&path).expect("docs/schema.graphql exists");
    assert!(
        committed == sdl,
        "the GraphQL schema changed; review it and run `UPDATE_SCHEMA=1 cargo test -p terraplane-api --test schema`"
    );
    for field in [
        "runTrigger",
        "runConfirm",
        "stackLock",
        "stateForceUnlock",
        "runLogs",
        "runStateChanged",
        "contextCreate",
        "driftScheduleAdd",
        "notificationEndpointCreate",
        "policyCreate",
        "policySimulate",
    ] {
        assert!(sdl.contains(field), "{field} missing from the schema");
    }
}
