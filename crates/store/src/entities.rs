//! sea-orm entities, one module per table. They never leave this crate: repositories
//! return the records in `records.rs`.

macro_rules! no_relations {
    () => {
        #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
        pub enum Relation {}
        impl ActiveModelBehavior for ActiveModel {}
    };
}

pub mod organizations {
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "organizations")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub slug: String,
        pub name: String,
        pub created_at: DateTimeUtc,
    }
    no_relations!();
}

pub mod users {
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "users")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub email: String,
        pub name: String,
        pub password_hash: Option<String>,
        pub is_admin: bool,
        pub created_at: DateTimeUtc,
    }
    no_relations!();
}

pub mod memberships {
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "memberships")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub org_id: String,
        #[sea_orm(primary_key, auto_increment = false)]
        pub user_id: String,
        pub role: String,
        pub created_at: DateTimeUtc,
    }
    no_relations!();
}

pub mod api_keys {
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "api_keys")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub org_id: String,
        pub user_id: Option<String>,
        pub name: String,
        pub secret_hash: String,
        pub role: String,
        pub created_at: DateTimeUtc,
        pub expires_at: Option<DateTimeUtc>,
        pub revoked_at: Option<DateTimeUtc>,
        pub last_used_at: Option<DateTimeUtc>,
        pub kind: String,
    }
    no_relations!();
}

pub mod stacks {
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "stacks")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub org_id: String,
        pub slug: String,
        pub name: String,
        pub description: String,
        pub repository: String,
        pub branch: String,
        pub project_root: String,
        pub tool: String,
        pub tool_version: Option<String>,
        pub autodeploy: bool,
        pub labels: String,
        pub worker_pool: String,
        pub space_id: Option<String>,
        pub locked_by: Option<String>,
        pub lock_note: Option<String>,
        pub locked_at: Option<DateTimeUtc>,
        pub created_at: DateTimeUtc,
        pub updated_at: DateTimeUtc,
        pub drift_status: String,
        pub drift_reaction: String,
        pub drift_checked_at: Option<DateTimeUtc>,
    }
    no_relations!();
}

pub mod runs {
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "runs")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub org_id: String,
        pub stack_id: String,
        pub run_type: String,
        pub state: String,
        pub commit_sha: Option<String>,
        pub triggered_by: String,
        pub trigger_kind: String,
        pub drift_detection: bool,
        pub plan_add: Option<i32>,
        pub plan_change: Option<i32>,
        pub plan_destroy: Option<i32>,
        pub has_changes: Option<bool>,
        pub error: Option<String>,
        pub outputs: Option<String>,
        pub fencing_token: i64,
        pub runner_id: Option<String>,
        pub lease_expires_at: Option<DateTimeUtc>,
        pub dispatched_at: Option<DateTimeUtc>,
        pub held_since: Option<DateTimeUtc>,
        pub review_stage: Option<String>,
        pub cancel_requested: bool,
        pub created_at: DateTimeUtc,
        pub updated_at: DateTimeUtc,
    }
    no_relations!();
}

pub mod run_events {
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "run_events")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub org_id: String,
        pub run_id: String,
        pub state: String,
        pub note: Option<String>,
        pub created_at: DateTimeUtc,
    }
    no_relations!();
}

pub mod log_chunks {
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "log_chunks")]
    pub struct Model {
        pub org_id: String,
        #[sea_orm(primary_key, auto_increment = false)]
        pub run_id: String,
        #[sea_orm(primary_key, auto_increment = false)]
        pub seq: i64,
        pub phase: String,
        pub data: String,
        pub created_at: DateTimeUtc,
    }
    no_relations!();
}

pub mod plan_artifacts {
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "plan_artifacts")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub run_id: String,
        pub org_id: String,
        pub plan_file: Vec<u8>,
        pub plan_json: String,
        pub sha256: String,
        pub size: i64,
        pub created_at: DateTimeUtc,
    }
    no_relations!();
}

pub mod state_versions {
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "state_versions")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub org_id: String,
        pub stack_id: String,
        pub version: i64,
        pub serial: Option<i64>,
        pub lineage: Option<String>,
        pub md5: String,
        pub sha256: String,
        pub size: i64,
        pub data: Vec<u8>,
        pub outputs: String,
        pub run_id: Option<String>,
        pub created_by: String,
        pub created_at: DateTimeUtc,
    }
    no_relations!();
}

pub mod state_locks {
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "state_locks")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub stack_id: String,
        pub org_id: String,
        pub lock_id: String,
        pub info: String,
        pub holder: String,
        pub run_id: Option<String>,
        pub needs_recovery: bool,
        pub created_at: DateTimeUtc,
    }
    no_relations!();
}

pub mod spaces {
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "spaces")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub org_id: String,
        pub slug: String,
        pub name: String,
        pub description: String,
        pub parent_id: Option<String>,
        pub inherit: bool,
        pub created_at: DateTimeUtc,
    }
    no_relations!();
}

pub mod teams {
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "teams")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub org_id: String,
        pub slug: String,
        pub name: String,
        pub created_at: DateTimeUtc,
    }
    no_relations!();
}

pub mod team_members {
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "team_members")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub team_id: String,
        #[sea_orm(primary_key, auto_increment = false)]
        pub user_id: String,
        pub org_id: String,
        pub created_at: DateTimeUtc,
    }
    no_relations!();
}

pub mod role_bindings {
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "role_bindings")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub org_id: String,
        pub space_id: String,
        pub subject_kind: String,
        pub subject_id: String,
        pub role: String,
        pub created_at: DateTimeUtc,
    }
    no_relations!();
}

pub mod audit_events {
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "audit_events")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub org_id: String,
        pub seq: i64,
        pub actor: String,
        pub action: String,
        pub target_kind: String,
        pub target: String,
        pub before: Option<String>,
        pub after: Option<String>,
        pub request_id: Option<String>,
        pub client_ip: Option<String>,
        pub created_at: DateTimeUtc,
        pub prev_hash: String,
        pub hash: String,
    }
    no_relations!();
}

pub mod audit_delivery {
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "audit_delivery")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub org_id: String,
        pub last_seq: i64,
        pub failures: i32,
        pub next_attempt_at: Option<DateTimeUtc>,
        pub last_error: Option<String>,
        pub updated_at: DateTimeUtc,
    }
    no_relations!();
}

pub mod sessions {
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "sessions")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub org_id: String,
        pub user_id: String,
        pub refresh_hash: String,
        pub previous_hash: Option<String>,
        pub created_at: DateTimeUtc,
        pub expires_at: DateTimeUtc,
        pub revoked_at: Option<DateTimeUtc>,
        pub policy_admin: bool,
    }
    no_relations!();
}

pub mod sso_logins {
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "sso_logins")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub state: String,
        pub nonce: String,
        pub verifier: String,
        pub return_to: Option<String>,
        pub created_at: DateTimeUtc,
    }
    no_relations!();
}

pub mod sso_identities {
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "sso_identities")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub issuer: String,
        #[sea_orm(primary_key, auto_increment = false)]
        pub subject: String,
        pub user_id: String,
        pub created_at: DateTimeUtc,
    }
    no_relations!();
}

pub mod org_keys {
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "org_keys")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub org_id: String,
        pub wrapped_key: Vec<u8>,
        pub created_at: DateTimeUtc,
        pub master_key_id: String,
    }
    no_relations!();
}

pub mod contexts {
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "contexts")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub org_id: String,
        pub space_id: String,
        pub slug: String,
        pub name: String,
        pub description: String,
        pub labels: String,
        pub created_at: DateTimeUtc,
        pub updated_at: DateTimeUtc,
    }
    no_relations!();
}

pub mod config_values {
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "config_values")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub org_id: String,
        pub owner: String,
        pub kind: String,
        pub name: String,
        pub value: Vec<u8>,
        pub secret: bool,
        pub apply_only: bool,
        pub checksum: String,
        pub created_at: DateTimeUtc,
        pub updated_at: DateTimeUtc,
    }
    no_relations!();
}

pub mod context_attachments {
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "context_attachments")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub org_id: String,
        pub context_id: String,
        pub stack_id: String,
        pub priority: i32,
        pub created_at: DateTimeUtc,
    }
    no_relations!();
}

pub mod oidc_keys {
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "oidc_keys")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub kid: String,
        pub private_key: Vec<u8>,
        pub public_jwk: String,
        pub master_key_id: String,
        pub created_at: DateTimeUtc,
        pub retired_at: Option<DateTimeUtc>,
    }
    no_relations!();
}

pub mod aws_integrations {
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "aws_integrations")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub org_id: String,
        pub space_id: String,
        pub slug: String,
        pub name: String,
        pub role_arn: String,
        pub read_role_arn: Option<String>,
        pub audience: Option<String>,
        pub duration_secs: i32,
        pub created_at: DateTimeUtc,
    }
    no_relations!();
}

pub mod aws_attachments {
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "aws_attachments")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub stack_id: String,
        pub org_id: String,
        pub integration_id: String,
        pub created_at: DateTimeUtc,
    }
    no_relations!();
}

pub mod drift_schedules {
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "drift_schedules")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub org_id: String,
        pub stack_id: String,
        pub cron: String,
        pub timezone: String,
        pub next_run_at: DateTimeUtc,
        pub created_at: DateTimeUtc,
    }
    no_relations!();
}

pub mod drift_records {
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "drift_records")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub org_id: String,
        pub stack_id: String,
        pub open: bool,
        pub resources: String,
        pub last_run_id: String,
        pub first_seen_at: DateTimeUtc,
        pub last_seen_at: DateTimeUtc,
        pub resolved_at: Option<DateTimeUtc>,
        pub resolved_by_run_id: Option<String>,
    }
    no_relations!();
}

pub mod notification_endpoints {
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "notification_endpoints")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub org_id: String,
        pub space_id: String,
        pub slug: String,
        pub name: String,
        pub kind: String,
        pub url: String,
        pub secret: Option<Vec<u8>>,
        pub events: String,
        pub stack_labels: String,
        pub created_at: DateTimeUtc,
    }
    no_relations!();
}

pub mod notification_deliveries {
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "notification_deliveries")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub org_id: String,
        pub endpoint_id: String,
        pub event: String,
        pub stack_id: Option<String>,
        pub run_id: Option<String>,
        pub payload: String,
        pub status: String,
        pub attempts: i32,
        pub last_status_code: Option<i32>,
        pub last_error: Option<String>,
        pub next_attempt_at: Option<DateTimeUtc>,
        pub created_at: DateTimeUtc,
        pub delivered_at: Option<DateTimeUtc>,
    }
    no_relations!();
}

pub mod policies {
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "policies")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub org_id: String,
        pub space_id: String,
        pub slug: String,
        pub name: String,
        pub policy_type: String,
        pub description: String,
        pub labels: String,
        pub body: String,
        pub version: i32,
        pub created_at: DateTimeUtc,
        pub updated_at: DateTimeUtc,
    }
    no_relations!();
}

pub mod policy_versions {
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "policy_versions")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub org_id: String,
        pub policy_id: String,
        pub version: i32,
        pub body: String,
        pub labels: String,
        pub created_by: String,
        pub created_at: DateTimeUtc,
    }
    no_relations!();
}

pub mod policy_attachments {
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "policy_attachments")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub org_id: String,
        pub policy_id: String,
        pub stack_id: String,
        pub created_at: DateTimeUtc,
    }
    no_relations!();
}

pub mod policy_evaluations {
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "policy_evaluations")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub org_id: String,
        pub policy_id: String,
        pub policy_version: i32,
        pub policy_type: String,
        pub run_id: Option<String>,
        pub stack_id: Option<String>,
        pub subject: String,
        pub input_hash: String,
        pub outcome: String,
        pub messages: String,
        pub result: String,
        pub created_at: DateTimeUtc,
    }
    no_relations!();
}

pub mod policy_inputs {
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "policy_inputs")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub org_id: String,
        #[sea_orm(primary_key, auto_increment = false)]
        pub input_hash: String,
        pub policy_type: String,
        pub input: String,
        pub created_at: DateTimeUtc,
    }
    no_relations!();
}

pub mod policy_samples {
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "policy_samples")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub org_id: String,
        pub policy_id: String,
        pub evaluation_id: String,
        pub input_hash: String,
        pub created_at: DateTimeUtc,
    }
    no_relations!();
}

pub mod run_reviews {
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "run_reviews")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub org_id: String,
        pub run_id: String,
        pub reviewer: String,
        pub reviewer_name: String,
        pub teams: String,
        pub stage: String,
        pub decision: String,
        pub note: String,
        pub remote_ip: Option<String>,
        pub created_at: DateTimeUtc,
    }
    no_relations!();
}
