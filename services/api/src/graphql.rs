//! The GraphQL API (`/graphql`, subscriptions at `/graphql/ws`). Resolvers translate
//! arguments and results; the work happens in `service`. Stacks are addressed by slug
//! (their `id`), runs by UUID.

use std::sync::Arc;
use std::time::Duration;

use async_graphql::extensions::{Extension, ExtensionContext, ExtensionFactory, NextExecute, NextSubscribe};
use async_graphql::{Context, Enum, ID, InputObject, Json, Object, Response, Schema, SimpleObject, Subscription};
use chrono::{DateTime, Utc};
use futures::Stream;
use terraplane_domain::{RunEvent, RunId, RunState, RunType};
use terraplane_store::StackPatch;

use crate::AppState;
use crate::auth::{Action, Principal, verify_password};
use crate::error::{ApiError, ApiResult};
use crate::service::{self, StackInput};

pub type ApiSchema = Schema<Query, Mutation, SubscriptionRoot>;

#[derive(async_graphql::MergedObject, Default)]
pub struct Query(
    QueryRoot,
    crate::graphql_vars::VarsQuery,
    crate::graphql_drift::DriftQuery,
    crate::graphql_notify::NotifyQuery,
    crate::graphql_policy::PolicyQuery,
);

#[derive(async_graphql::MergedObject, Default)]
pub struct Mutation(
    MutationRoot,
    crate::graphql_vars::VarsMutation,
    crate::graphql_drift::DriftMutation,
    crate::graphql_notify::NotifyMutation,
    crate::graphql_policy::PolicyMutation,
);

pub fn build_schema(state: Arc<AppState>) -> ApiSchema {
    Schema::build(Query::default(), Mutation::default(), SubscriptionRoot)
        .data(state)
        .extension(ErrorCodes)
        .finish()
}

/// Gives every error that came from an [`ApiError`] its stable `extensions.code`, and makes
/// internal errors opaque (the cause is logged).
struct ErrorCodes;

impl ExtensionFactory for ErrorCodes {
    fn create(&self) -> Arc<dyn Extension> {
        Arc::new(ErrorCodes)
    }
}

#[async_trait::async_trait]
impl Extension for ErrorCodes {
    async fn execute(
        &self,
        ctx: &ExtensionContext<'_>,
        operation_name: Option<&str>,
        next: NextExecute<'_>,
    ) -> Response {
        let mut resp = next.run(ctx, operation_name).await;
        add_error_codes(&mut resp);
        resp
    }

    fn subscribe<'s>(
        &self,
        ctx: &ExtensionContext<'_>,
        stream: futures::stream::BoxStream<'s, Response>,
        next: NextSubscribe<'_>,
    ) -> futures::stream::BoxStream<'s, Response> {
        use futures::StreamExt;
        Box::pin(next.run(ctx, stream).map(|mut r| {
            add_error_codes(&mut r);
            r
        }))
    }
}

fn add_error_codes(resp: &mut Response) {
    for e in &mut resp.errors {
        if let Some(api) = e.source::<ApiError>() {
            let code = api.code();
            e.message = api.public_message();
            e.extensions.get_or_insert_with(Default::default).set("code", code);
        }
    }
}

pub(crate) fn state<'a>(ctx: &Context<'a>) -> &'a Arc<AppState> {
    // Put there by build_schema; its absence is a programming error caught by every test.
    #[allow(clippy::expect_used)]
    ctx.data::<Arc<AppState>>().expect("AppState in schema data")
}

pub(crate) fn principal<'a>(ctx: &Context<'a>) -> ApiResult<&'a Principal> {
    if let Ok(Some(e)) = ctx.data::<Option<AuthFailure>>() {
        return Err(ApiError::Unauthenticated(e.0.clone()));
    }
    ctx.data::<Principal>()
        .map_err(|_| ApiError::Unauthenticated("missing credentials".into()))
}

/// Why the request's credential was refused (reported by fields that need one).
#[derive(Clone, Debug)]
pub struct AuthFailure(pub String);

fn parse_run_id(id: &ID) -> ApiResult<RunId> {
    id.parse().map_err(|_| ApiError::NotFound("run"))
}

#[derive(Enum, Copy, Clone, Eq, PartialEq, Debug)]
#[graphql(name = "RunState", remote = "terraplane_domain::RunState")]
pub enum GqlRunState {
    Queued,
    /// Held by approval policies until reviews approve it.
    PendingReview,
    Preparing,
    Initializing,
    Planning,
    Unconfirmed,
    Confirmed,
    Applying,
    Finished,
    Failed,
    Discarded,
    Canceled,
}

#[derive(Enum, Copy, Clone, Eq, PartialEq, Debug)]
#[graphql(name = "RunType", remote = "terraplane_domain::RunType")]
pub enum GqlRunType {
    Tracked,
    Proposed,
}

#[derive(SimpleObject)]
pub struct Organization {
    id: ID,
    slug: String,
    name: String,
}

#[derive(SimpleObject)]
pub struct Viewer {
    id: String,
    name: String,
    organization: Organization,
    role: String,
}

#[derive(SimpleObject)]
pub struct LoginResult {
    /// Short-lived access token (`auth.session_ttl_secs`).
    token: String,
    /// Exchanged for a new access token by `refresh`; rotated on each use.
    refresh_token: String,
    expires_at: DateTime<Utc>,
    organization: Organization,
}

#[derive(SimpleObject)]
pub struct StackLock {
    holder: String,
    note: Option<String>,
    locked_at: DateTime<Utc>,
}

#[derive(SimpleObject)]
pub struct StateLockInfo {
    id: String,
    holder: String,
    info: Json<serde_json::Value>,
    run_id: Option<ID>,
    needs_recovery: bool,
    created_at: DateTime<Utc>,
}

impl From<terraplane_store::StateLock> for StateLockInfo {
    fn from(l: terraplane_store::StateLock) -> Self {
        Self {
            id: l.lock_id,
            holder: l.holder,
            info: Json(serde_json::from_str(&l.info).unwrap_or_default()),
            run_id: l.run_id.map(|r| ID(r.to_string())),
            needs_recovery: l.needs_recovery,
            created_at: l.created_at,
        }
    }
}

pub struct Stack(pub(crate) terraplane_store::Stack);

#[Object]
impl Stack {
    /// The stack's slug.
    async fn id(&self) -> ID {
        ID(self.0.slug.clone())
    }
    async fn name(&self) -> &str {
        &self.0.name
    }
    async fn description(&self) -> &str {
        &self.0.description
    }
    async fn repository(&self) -> &str {
        &self.0.repository
    }
    async fn branch(&self) -> &str {
        &self.0.branch
    }
    async fn project_root(&self) -> &str {
        &self.0.project_root
    }
    async fn tool(&self) -> &str {
        &self.0.tool
    }
    async fn tool_version(&self) -> Option<&str> {
        self.0.tool_version.as_deref()
    }
    async fn autodeploy(&self) -> bool {
        self.0.autodeploy
    }
    async fn labels(&self) -> &[String] {
        &self.0.labels
    }
    /// IN_SYNC, DRIFTED, or UNKNOWN before the first drift check.
    async fn drift_status(&self) -> crate::graphql_drift::GqlDriftStatus {
        self.0.drift_status.into()
    }
    /// What a drift check that finds drift does: ALERT or RECONCILE.
    async fn drift_reaction(&self) -> crate::graphql_drift::GqlReaction {
        self.0.drift_reaction.into()
    }
    async fn drift_checked_at(&self) -> Option<DateTime<Utc>> {
        self.0.drift_checked_at
    }
    async fn worker_pool(&self) -> &str {
        &self.0.worker_pool
    }
    /// Slug of the stack's space.
    async fn space(&self, ctx: &Context<'_>) -> async_graphql::Result<String> {
        let p = principal(ctx)?;
        Ok(state(ctx)
            .store
            .scope(p.org)
            .get_space(self.0.space_id)
            .await
            .map_err(ApiError::from)?
            .slug)
    }
    async fn lock(&self) -> Option<StackLock> {
        self.0.lock.as_ref().map(|l| StackLock {
            holder: l.holder.clone(),
            note: l.note.clone(),
            locked_at: l.locked_at,
        })
    }
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.created_at
    }
    async fn updated_at(&self) -> DateTime<Utc> {
        self.0.updated_at
    }
    /// The Terraform state lock, if someone holds it.
    async fn state_lock(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<StateLockInfo>> {
        let p = principal(ctx)?;
        Ok(state(ctx)
            .store
            .scope(p.org)
            .get_state_lock(self.0.id)
            .await
            .map_err(ApiError::from)?
            .map(Into::into))
    }
    async fn runs(&self, ctx: &Context<'_>, #[graphql(default = 20)] limit: u64) -> async_graphql::Result<Vec<Run>> {
        let p = principal(ctx)?;
        let runs = state(ctx)
            .store
            .scope(p.org)
            .list_runs(self.0.id, limit.min(500))
            .await
            .map_err(ApiError::from)?;
        Ok(runs
            .into_iter()
            .map(|r| Run {
                run: r,
                stack_slug: self.0.slug.clone(),
            })
            .collect())
    }
}

#[derive(SimpleObject)]
pub struct PlanSummary {
    add: i32,
    change: i32,
    destroy: i32,
}

#[derive(SimpleObject)]
#[graphql(name = "RunEvent")]
pub struct RunEventGql {
    state: GqlRunState,
    note: Option<String>,
    at: DateTime<Utc>,
}

#[derive(SimpleObject, Clone)]
pub struct LogChunk {
    seq: i64,
    phase: String,
    data: String,
    created_at: DateTime<Utc>,
}

impl From<terraplane_store::LogChunk> for LogChunk {
    fn from(c: terraplane_store::LogChunk) -> Self {
        Self {
            seq: c.seq,
            phase: c.phase,
            data: c.data,
            created_at: c.created_at,
        }
    }
}

pub struct Run {
    run: terraplane_store::Run,
    stack_slug: String,
}

impl Run {
    pub(crate) fn new(run: terraplane_store::Run, stack_slug: String) -> Self {
        Self { run, stack_slug }
    }
}

#[Object]
impl Run {
    async fn id(&self) -> ID {
        ID(self.run.id.to_string())
    }
    async fn stack_id(&self) -> &str {
        &self.stack_slug
    }
    #[graphql(name = "type")]
    async fn run_type(&self) -> GqlRunType {
        self.run.run_type.into()
    }
    async fn state(&self) -> GqlRunState {
        self.run.state.into()
    }
    async fn terminal(&self) -> bool {
        self.run.state.is_terminal()
    }
    async fn commit_sha(&self) -> Option<&str> {
        self.run.commit_sha.as_deref()
    }
    async fn triggered_by(&self) -> &str {
        &self.run.triggered_by
    }
    async fn drift_detection(&self) -> bool {
        self.run.drift_detection
    }
    async fn plan_summary(&self) -> Option<PlanSummary> {
        self.run.plan_summary.map(|s| PlanSummary {
            add: s.add,
            change: s.change,
            destroy: s.destroy,
        })
    }
    async fn has_changes(&self) -> Option<bool> {
        self.run.has_changes
    }
    async fn error(&self) -> Option<&str> {
        self.run.error.as_deref()
    }
    async fn outputs(&self) -> Option<Json<serde_json::Value>> {
        self.run.outputs.clone().map(Json)
    }
    async fn runner_id(&self) -> Option<&str> {
        self.run.runner_id.as_deref()
    }
    async fn created_at(&self) -> DateTime<Utc> {
        self.run.created_at
    }
    async fn updated_at(&self) -> DateTime<Utc> {
        self.run.updated_at
    }
    /// Every state change with its time.
    async fn events(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<RunEventGql>> {
        let p = principal(ctx)?;
        let evs = state(ctx)
            .store
            .scope(p.org)
            .list_run_events(self.run.id)
            .await
            .map_err(ApiError::from)?;
        Ok(evs
            .into_iter()
            .map(|e| RunEventGql {
                state: e.state.into(),
                note: e.note,
                at: e.at,
            })
            .collect())
    }
    /// Log chunks after `afterSeq` (all when absent), in order.
    async fn logs(
        &self,
        ctx: &Context<'_>,
        after_seq: Option<i64>,
        #[graphql(default = 1000)] limit: u64,
    ) -> async_graphql::Result<Vec<LogChunk>> {
        let p = principal(ctx)?;
        let chunks = state(ctx)
            .store
            .scope(p.org)
            .list_logs(self.run.id, after_seq, limit.min(10_000))
            .await
            .map_err(ApiError::from)?;
        Ok(chunks.into_iter().map(Into::into).collect())
    }
    /// Reviews of this run, oldest first.
    async fn reviews(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<crate::graphql_policy::RunReview>> {
        let p = principal(ctx)?;
        let list = state(ctx)
            .store
            .scope(p.org)
            .run_reviews(&self.run.id.to_string())
            .await
            .map_err(ApiError::from)?;
        Ok(list.into_iter().map(crate::graphql_policy::review_gql).collect())
    }
    /// Policy evaluations made for this run, oldest first.
    async fn policy_evaluations(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<Vec<crate::graphql_policy::PolicyEvaluation>> {
        let p = principal(ctx)?;
        let list = crate::policy::run_evaluations(state(ctx), p.org, self.run.id).await?;
        Ok(list
            .into_iter()
            .map(|(e, slug)| crate::graphql_policy::evaluation_gql(e, slug))
            .collect())
    }
    /// The plan as `terraform show -json` printed it, with sensitive values redacted.
    async fn plan(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<Json<serde_json::Value>>> {
        let p = principal(ctx)?;
        match state(ctx).store.scope(p.org).get_plan(self.run.id).await {
            Ok(a) => Ok(Some(Json(serde_json::from_str(&a.plan_json).unwrap_or_default()))),
            Err(terraplane_store::StoreError::NotFound(_)) => Ok(None),
            Err(e) => Err(ApiError::from(e).into()),
        }
    }
}

#[derive(SimpleObject)]
pub struct StateVersion {
    serial: Option<i64>,
    version: i64,
    lineage: Option<String>,
    md5: String,
    sha256: String,
    size: i64,
    outputs: Json<serde_json::Value>,
    run_id: Option<ID>,
    created_by: String,
    created_at: DateTime<Utc>,
}

impl From<terraplane_store::StateVersion> for StateVersion {
    fn from(v: terraplane_store::StateVersion) -> Self {
        Self {
            serial: v.serial,
            version: v.version,
            lineage: v.lineage,
            md5: v.md5,
            sha256: v.sha256,
            size: v.size,
            outputs: Json(v.outputs),
            run_id: v.run_id.map(|r| ID(r.to_string())),
            created_by: v.created_by,
            created_at: v.created_at,
        }
    }
}

async fn load_run(ctx: &Context<'_>, id: RunId) -> ApiResult<Run> {
    let p = principal(ctx)?;
    let (run, stack) = service::get_run(state(ctx), p, id, Action::Read).await?;
    Ok(Run {
        run,
        stack_slug: stack.slug,
    })
}

pub struct Space {
    space: terraplane_store::Space,
    parent: Option<String>,
}

#[Object]
impl Space {
    /// The space's slug.
    async fn id(&self) -> ID {
        ID(self.space.slug.clone())
    }
    async fn name(&self) -> &str {
        &self.space.name
    }
    async fn description(&self) -> &str {
        &self.space.description
    }
    /// Slug of the parent space; none for the root space.
    async fn parent(&self) -> Option<&str> {
        self.parent.as_deref()
    }
    /// Whether roles granted on the parent apply here too.
    async fn inherit(&self) -> bool {
        self.space.inherit
    }
    async fn created_at(&self) -> DateTime<Utc> {
        self.space.created_at
    }
}

fn spaces_with_parents(all: &[terraplane_store::Space], visible: Vec<terraplane_store::Space>) -> Vec<Space> {
    let slug = |id| all.iter().find(|s| s.id == id).map(|s| s.slug.clone());
    visible
        .into_iter()
        .map(|s| Space {
            parent: s.parent_id.and_then(slug),
            space: s,
        })
        .collect()
}

#[derive(SimpleObject)]
pub struct Team {
    /// The team's slug.
    id: ID,
    name: String,
    /// Members' emails.
    members: Vec<String>,
}

#[derive(SimpleObject)]
pub struct Member {
    id: ID,
    email: String,
    name: String,
    /// `owner` or `member` of the organization.
    role: String,
}

#[derive(SimpleObject)]
pub struct RoleBinding {
    /// Slug of the space.
    space: String,
    /// `user`, `team` or `api_key`.
    subject_kind: String,
    /// The user's email, the team's slug or the API key's id.
    subject: String,
    role: String,
    created_at: DateTime<Utc>,
}

#[derive(InputObject)]
pub struct SubjectInput {
    user: Option<String>,
    team: Option<String>,
    api_key: Option<String>,
}

impl SubjectInput {
    fn into_ref(self) -> ApiResult<service::SubjectRef> {
        match (self.user, self.team, self.api_key) {
            (Some(u), None, None) => Ok(service::SubjectRef::User(u)),
            (None, Some(t), None) => Ok(service::SubjectRef::Team(t)),
            (None, None, Some(k)) => Ok(service::SubjectRef::ApiKey(k)),
            _ => Err(ApiError::BadRequest("give exactly one of user, team or apiKey".into())),
        }
    }
}

async fn team_view(st: &AppState, p: &Principal, t: terraplane_store::Team) -> ApiResult<Team> {
    let ids = st.store.scope(p.org).list_team_members(t.id).await?;
    let mut members = Vec::new();
    for id in ids {
        members.push(st.store.get_user(id).await?.email);
    }
    members.sort();
    Ok(Team {
        id: ID(t.slug),
        name: t.name,
        members,
    })
}

async fn binding_view(st: &AppState, p: &Principal, b: terraplane_store::RoleBinding) -> ApiResult<RoleBinding> {
    let scope = st.store.scope(p.org);
    let space = scope.get_space(b.space_id).await?.slug;
    let (kind, subject) = match b.subject {
        terraplane_store::Subject::User(u) => ("user", st.store.get_user(u).await?.email),
        terraplane_store::Subject::Team(t) => {
            let slug = scope
                .list_teams()
                .await?
                .into_iter()
                .find(|x| x.id == t)
                .map(|x| x.slug)
                .unwrap_or_default();
            ("team", slug)
        }
        terraplane_store::Subject::ApiKey(k) => ("api_key", k.to_string()),
    };
    Ok(RoleBinding {
        space,
        subject_kind: kind.into(),
        subject,
        role: b.role.as_str().into(),
        created_at: b.created_at,
    })
}

#[derive(SimpleObject)]
pub struct ApiKey {
    id: ID,
    name: String,
    /// `personal` or `service`.
    kind: String,
    /// Organization-wide role (`owner`, `admin`, `writer`, `reader`), empty when the key's
    /// rights come from space bindings only.
    role: String,
    /// The creator of a personal key.
    owner: Option<String>,
    created_at: DateTime<Utc>,
    expires_at: Option<DateTime<Utc>>,
    last_used_at: Option<DateTime<Utc>>,
    revoked_at: Option<DateTime<Utc>>,
}

async fn key_view(st: &AppState, k: terraplane_store::ApiKey) -> ApiResult<ApiKey> {
    let owner = match k.user_id {
        Some(u) => Some(st.store.get_user(u).await?.email),
        None => None,
    };
    Ok(ApiKey {
        id: ID(k.id.to_string()),
        name: k.name,
        kind: k.kind,
        role: k.role,
        owner,
        created_at: k.created_at,
        expires_at: k.expires_at,
        last_used_at: k.last_used_at,
        revoked_at: k.revoked_at,
    })
}

#[derive(SimpleObject)]
pub struct ApiKeyCreated {
    key: ApiKey,
    /// The secret, shown this once: only its hash is stored.
    secret: String,
}

#[derive(SimpleObject)]
#[graphql(name = "AuditEvent")]
pub struct AuditEventGql {
    id: ID,
    seq: i64,
    actor: String,
    action: String,
    target_kind: String,
    target: String,
    before: Option<Json<serde_json::Value>>,
    after: Option<Json<serde_json::Value>>,
    request_id: Option<String>,
    client_ip: Option<String>,
    at: DateTime<Utc>,
    hash: String,
    prev_hash: String,
}

impl From<terraplane_store::AuditEvent> for AuditEventGql {
    fn from(e: terraplane_store::AuditEvent) -> Self {
        Self {
            id: ID(e.id),
            seq: e.seq,
            actor: e.actor,
            action: e.action,
            target_kind: e.target_kind,
            target: e.target,
            before: e.before.map(Json),
            after: e.after.map(Json),
            request_id: e.request_id,
            client_ip: e.client_ip,
            at: e.created_at,
            hash: e.hash,
            prev_hash: e.prev_hash,
        }
    }
}

#[derive(SimpleObject)]
pub struct AuditVerification {
    ok: bool,
    /// Events verified before the first problem (all of them when ok).
    events: i64,
    problem: Option<String>,
    seq: Option<i64>,
    event_id: Option<String>,
}

pub(crate) async fn start_session(
    st: &AppState,
    user: terraplane_domain::UserId,
    org: terraplane_domain::OrgId,
    admin: bool,
    now: DateTime<Utc>,
) -> ApiResult<(String, String, DateTime<Utc>)> {
    let refresh = crate::auth::new_refresh_token();
    let until = now + chrono::Duration::seconds(st.cfg.auth.refresh_ttl_secs as i64);
    let session = st
        .store
        .create_session(org, user, &crate::auth::hash_secret(&refresh), until, now)
        .await?;
    if admin {
        st.store.set_session_admin(&session.id).await?;
    }
    let (token, expires_at) = st.auth.issue_session(user, org, &session.id, now)?;
    Ok((token, refresh, expires_at))
}

#[derive(Default)]
pub struct QueryRoot;

#[Object]
impl QueryRoot {
    async fn me(&self, ctx: &Context<'_>) -> async_graphql::Result<Viewer> {
        let p = principal(ctx)?;
        let org = state(ctx).store.get_org(p.org).await.map_err(ApiError::from)?;
        Ok(Viewer {
            id: match &p.actor {
                crate::auth::Actor::User { id, .. } => id.to_string(),
                crate::auth::Actor::ApiKey { id, .. } => id.to_string(),
                crate::auth::Actor::Run { run_id, .. } => run_id.to_string(),
            },
            name: p.name(),
            organization: Organization {
                id: ID(org.id.to_string()),
                slug: org.slug,
                name: org.name,
            },
            role: if p.access.is_owner() {
                "owner".into()
            } else {
                "member".into()
            },
        })
    }

    async fn stacks(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<Stack>> {
        let p = principal(ctx)?;
        Ok(service::list_stacks(state(ctx), p)
            .await?
            .into_iter()
            .map(Stack)
            .collect())
    }

    async fn stack(&self, ctx: &Context<'_>, id: ID) -> async_graphql::Result<Option<Stack>> {
        let p = principal(ctx)?;
        match service::get_stack(state(ctx), p, &id, Action::Read).await {
            Ok(s) => Ok(Some(Stack(s))),
            Err(ApiError::NotFound(_)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    async fn runs(
        &self,
        ctx: &Context<'_>,
        stack_id: ID,
        #[graphql(default = 20)] limit: u64,
    ) -> async_graphql::Result<Vec<Run>> {
        let p = principal(ctx)?;
        let stack = service::get_stack(state(ctx), p, &stack_id, Action::Read).await?;
        let scope = state(ctx).store.scope(p.org);
        let runs = scope
            .list_runs(stack.id, limit.min(500))
            .await
            .map_err(ApiError::from)?;
        Ok(runs
            .into_iter()
            .map(|r| Run {
                run: r,
                stack_slug: stack.slug.clone(),
            })
            .collect())
    }

    async fn run(&self, ctx: &Context<'_>, id: ID) -> async_graphql::Result<Option<Run>> {
        principal(ctx)?.require_member()?;
        let Ok(id) = id.parse::<RunId>() else {
            return Ok(None);
        };
        match load_run(ctx, id).await {
            Ok(r) => Ok(Some(r)),
            Err(ApiError::NotFound(_)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The caller's organizations (every organization for instance administrators).
    async fn organizations(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<Organization>> {
        let p = principal(ctx)?;
        Ok(service::list_orgs(state(ctx), p)
            .await?
            .into_iter()
            .map(|o| Organization {
                id: ID(o.id.to_string()),
                slug: o.slug,
                name: o.name,
            })
            .collect())
    }

    /// Spaces the caller can see.
    async fn spaces(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<Space>> {
        let p = principal(ctx)?;
        let st = state(ctx);
        Ok(service::list_spaces(st, p)
            .await?
            .into_iter()
            .map(|(space, parent)| Space { space, parent })
            .collect())
    }

    async fn space(&self, ctx: &Context<'_>, id: ID) -> async_graphql::Result<Option<Space>> {
        let p = principal(ctx)?;
        let st = state(ctx);
        match service::get_space(st, p, &id, Action::Read).await {
            Ok(s) => {
                let all = st.store.scope(p.org).list_spaces().await.map_err(ApiError::from)?;
                Ok(spaces_with_parents(&all, vec![s]).pop())
            }
            Err(ApiError::NotFound(_)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    async fn teams(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<Team>> {
        let p = principal(ctx)?;
        let st = state(ctx);
        let mut out = Vec::new();
        for t in service::list_teams(st, p).await? {
            out.push(team_view(st, p, t).await?);
        }
        Ok(out)
    }

    /// Members of the organization.
    async fn users(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<Member>> {
        let p = principal(ctx)?;
        Ok(service::list_users(state(ctx), p)
            .await?
            .into_iter()
            .map(|(u, role)| Member {
                id: ID(u.id.to_string()),
                email: u.email,
                name: u.name,
                role,
            })
            .collect())
    }

    /// Role bindings on the spaces the caller administers.
    async fn role_bindings(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<RoleBinding>> {
        let p = principal(ctx)?;
        let st = state(ctx);
        let mut out = Vec::new();
        for b in service::list_bindings(st, p).await? {
            out.push(binding_view(st, p, b).await?);
        }
        Ok(out)
    }

    /// API keys: every key for owners, your personal keys otherwise. Secrets are never shown.
    async fn api_keys(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<ApiKey>> {
        let p = principal(ctx)?;
        let st = state(ctx);
        let mut out = Vec::new();
        for k in service::list_api_keys(st, p).await? {
            out.push(key_view(st, k).await?);
        }
        Ok(out)
    }

    /// The organization's audit trail, newest first (owners).
    #[allow(clippy::too_many_arguments)]
    async fn audit_events(
        &self,
        ctx: &Context<'_>,
        actor: Option<String>,
        action: Option<String>,
        target: Option<String>,
        since: Option<DateTime<Utc>>,
        until: Option<DateTime<Utc>>,
        #[graphql(default = 100)] limit: u64,
    ) -> async_graphql::Result<Vec<AuditEventGql>> {
        let p = principal(ctx)?;
        p.require_owner()?;
        let f = terraplane_store::AuditFilter {
            actor,
            action,
            target,
            since,
            until,
            limit,
        };
        let events = state(ctx)
            .store
            .scope(p.org)
            .list_audit(&f)
            .await
            .map_err(ApiError::from)?;
        Ok(events.into_iter().map(AuditEventGql::from).collect())
    }

    /// Recomputes the audit chain; names the first event altered or removed (owners).
    async fn audit_verify(&self, ctx: &Context<'_>) -> async_graphql::Result<AuditVerification> {
        let p = principal(ctx)?;
        p.require_owner()?;
        let check = state(ctx)
            .store
            .scope(p.org)
            .verify_audit()
            .await
            .map_err(ApiError::from)?;
        Ok(match check {
            terraplane_store::ChainCheck::Intact { events } => AuditVerification {
                ok: true,
                events,
                problem: None,
                seq: None,
                event_id: None,
            },
            terraplane_store::ChainCheck::Altered { seq, id } => AuditVerification {
                ok: false,
                events: seq - 1,
                problem: Some(format!("event {seq} ({id}) was altered")),
                seq: Some(seq),
                event_id: Some(id),
            },
            terraplane_store::ChainCheck::Missing { seq } => AuditVerification {
                ok: false,
                events: seq - 1,
                problem: Some(format!("event {seq} was removed")),
                seq: Some(seq),
                event_id: None,
            },
        })
    }

    async fn state_versions(&self, ctx: &Context<'_>, stack_id: ID) -> async_graphql::Result<Vec<StateVersion>> {
        let p = principal(ctx)?;
        Ok(service::state_versions(state(ctx), p, &stack_id)
            .await?
            .into_iter()
            .map(Into::into)
            .collect())
    }
}

#[derive(InputObject)]
pub struct StackCreateInput {
    /// Defaults to a slug derived from `name`.
    slug: Option<String>,
    name: String,
    description: Option<String>,
    repository: String,
    branch: Option<String>,
    project_root: Option<String>,
    tool: Option<String>,
    tool_version: Option<String>,
    autodeploy: Option<bool>,
    labels: Option<Vec<String>>,
    worker_pool: Option<String>,
    /// Slug of the space the stack lives in; the root space when absent.
    space: Option<String>,
}

#[derive(InputObject, Default)]
pub struct StackUpdateInput {
    name: Option<String>,
    description: Option<String>,
    repository: Option<String>,
    branch: Option<String>,
    project_root: Option<String>,
    tool_version: Option<String>,
    autodeploy: Option<bool>,
    labels: Option<Vec<String>>,
    worker_pool: Option<String>,
    /// Move the stack to another space (admin on both).
    space: Option<String>,
}

#[derive(Default)]
pub struct MutationRoot;

#[Object]
impl MutationRoot {
    /// Exchanges email and password for a session token in `organization` (default: the
    /// user's first organization).
    async fn login(
        &self,
        ctx: &Context<'_>,
        email: String,
        password: String,
        organization: Option<String>,
    ) -> async_graphql::Result<LoginResult> {
        let st = state(ctx);
        let refused = || ApiError::Unauthenticated("invalid email or password".into());
        let meta = ctx.data::<crate::auth::RequestMeta>().cloned().unwrap_or_default();
        let ip = meta.client_ip.as_deref();
        if let Err(wait) = st.logins.check(&email, ip, st.clock.now()) {
            return Err(ApiError::TooManyAttempts(wait).into());
        }
        let user = match st.store.get_user_by_email(&email).await {
            Ok(u) => u,
            Err(terraplane_store::StoreError::NotFound(_)) => {
                // Same work as a real check, so timing doesn't reveal which emails exist.
                let _ = tokio::task::spawn_blocking(move || verify_password(&password, crate::DUMMY_HASH)).await;
                st.logins.failed(&email, ip, st.clock.now());
                return Err(refused().into());
            }
            Err(e) => return Err(ApiError::from(e).into()),
        };
        let hash = user.password_hash.clone().unwrap_or_default();
        let ok = tokio::task::spawn_blocking(move || verify_password(&password, &hash))
            .await
            .map_err(|e| ApiError::Internal(e.into()))?;
        let memberships = st.store.list_memberships(user.id).await.map_err(ApiError::from)?;
        let org = match &organization {
            Some(slug) => memberships.into_iter().find(|(o, _)| &o.slug == slug).map(|(o, _)| o),
            None => memberships.into_iter().next().map(|(o, _)| o),
        };
        // Logins are audited in the organization they were for (a known user's).
        let audit = |action: &str| terraplane_store::NewAuditEvent {
            actor: user.email.clone(),
            action: action.into(),
            target_kind: "user".into(),
            target: user.email.clone(),
            request_id: meta.request_id.clone(),
            client_ip: meta.client_ip.clone(),
            ..Default::default()
        };
        let now = st.clock.now();
        if !ok {
            tracing::info!("login refused");
            st.logins.failed(&email, ip, now);
            if let Some(org) = &org {
                st.store
                    .scope(org.id)
                    .append_audit(audit("login.failure"), now)
                    .await
                    .map_err(ApiError::from)?;
            }
            return Err(refused().into());
        }
        let org = org.ok_or_else(|| ApiError::Forbidden("you are not a member of that organization".into()))?;
        st.logins.succeeded(&email, ip);
        let scope = st.store.scope(org.id);
        let teams = scope.user_team_slugs(user.id).await.map_err(ApiError::from)?;
        let admin =
            match crate::policy::judge_login(st, &org, &user.email, &user.name, teams, meta.client_ip.clone()).await {
                Ok(a) => a,
                Err(e) => {
                    scope
                        .append_audit(audit("login.denied"), now)
                        .await
                        .map_err(ApiError::from)?;
                    return Err(e.into());
                }
            };
        let (token, refresh_token, expires_at) = start_session(st, user.id, org.id, admin, now).await?;
        st.store
            .scope(org.id)
            .append_audit(audit("login.success"), now)
            .await
            .map_err(ApiError::from)?;
        Ok(LoginResult {
            token,
            refresh_token,
            expires_at,
            organization: Organization {
                id: ID(org.id.to_string()),
                slug: org.slug,
                name: org.name,
            },
        })
    }

    /// Creates an account and an organization it owns, when the instance allows sign-up,
    /// and logs in to it.
    async fn sign_up(
        &self,
        ctx: &Context<'_>,
        email: String,
        password: String,
        organization: String,
        organization_name: Option<String>,
    ) -> async_graphql::Result<LoginResult> {
        let st = state(ctx);
        let meta = ctx.data::<crate::auth::RequestMeta>().cloned().unwrap_or_default();
        let (user, org) = service::sign_up(st, &meta, &email, &password, &organization, organization_name).await?;
        let (token, refresh_token, expires_at) = start_session(st, user.id, org.id, false, st.clock.now()).await?;
        Ok(LoginResult {
            token,
            refresh_token,
            expires_at,
            organization: Organization {
                id: ID(org.id.to_string()),
                slug: org.slug,
                name: org.name,
            },
        })
    }

    /// Exchanges a refresh token for a new access token and a new refresh token (the old
    /// one stops working; presenting it again ends the session).
    async fn refresh(&self, ctx: &Context<'_>, refresh_token: String) -> async_graphql::Result<LoginResult> {
        let st = state(ctx);
        let now = st.clock.now();
        let next = crate::auth::new_refresh_token();
        let presented = crate::auth::hash_secret(&refresh_token);
        match st
            .store
            .rotate_session(&presented, &crate::auth::hash_secret(&next), now)
            .await
            .map_err(ApiError::from)?
        {
            terraplane_store::Refresh::Rotated(session) => {
                let (token, expires_at) = st
                    .auth
                    .issue_session(session.user_id, session.org_id, &session.id, now)?;
                let user = st.store.get_user(session.user_id).await.map_err(ApiError::from)?;
                let meta = ctx.data::<crate::auth::RequestMeta>().cloned().unwrap_or_default();
                let e = terraplane_store::NewAuditEvent {
                    actor: user.email.clone(),
                    action: "login.refresh".into(),
                    target_kind: "user".into(),
                    target: user.email,
                    request_id: meta.request_id,
                    client_ip: meta.client_ip,
                    ..Default::default()
                };
                st.store
                    .scope(session.org_id)
                    .append_audit(e, now)
                    .await
                    .map_err(ApiError::from)?;
                let org = st.store.get_org(session.org_id).await.map_err(ApiError::from)?;
                Ok(LoginResult {
                    token,
                    refresh_token: next,
                    expires_at,
                    organization: Organization {
                        id: ID(org.id.to_string()),
                        slug: org.slug,
                        name: org.name,
                    },
                })
            }
            terraplane_store::Refresh::Reused => {
                Err(ApiError::Unauthenticated("refresh token was already used; the session is ended".into()).into())
            }
            terraplane_store::Refresh::Invalid => {
                Err(ApiError::Unauthenticated("invalid or expired refresh token".into()).into())
            }
        }
    }

    /// Ends the caller's login session: its access and refresh tokens stop working.
    async fn logout(&self, ctx: &Context<'_>) -> async_graphql::Result<bool> {
        let p = principal(ctx)?;
        let st = state(ctx);
        let sid = p
            .session
            .clone()
            .ok_or_else(|| ApiError::BadRequest("only a login session can log out".into()))?;
        let now = st.clock.now();
        st.store.revoke_session(&sid, now).await.map_err(ApiError::from)?;
        let e = service::event(p, "logout", "user", p.name(), None, None);
        st.store
            .scope(p.org)
            .append_audit(e, now)
            .await
            .map_err(ApiError::from)?;
        Ok(true)
    }

    async fn stack_create(&self, ctx: &Context<'_>, input: StackCreateInput) -> async_graphql::Result<Stack> {
        let p = principal(ctx)?;
        let i = StackInput {
            slug: input.slug,
            name: input.name,
            description: input.description,
            repository: input.repository,
            branch: input.branch,
            project_root: input.project_root,
            tool: input.tool,
            tool_version: input.tool_version,
            autodeploy: input.autodeploy,
            labels: input.labels,
            worker_pool: input.worker_pool,
            space: input.space,
        };
        Ok(Stack(service::create_stack(state(ctx), p, i).await?))
    }

    async fn stack_update(&self, ctx: &Context<'_>, id: ID, input: StackUpdateInput) -> async_graphql::Result<Stack> {
        let p = principal(ctx)?;
        let patch = StackPatch {
            name: input.name,
            description: input.description,
            repository: input.repository,
            branch: input.branch,
            project_root: input.project_root,
            tool_version: input.tool_version.map(Some),
            autodeploy: input.autodeploy,
            labels: input.labels,
            worker_pool: input.worker_pool,
            space_id: match input.space {
                Some(slug) => Some(service::get_space(state(ctx), p, &slug, Action::Admin).await?.id),
                None => None,
            },
        };
        Ok(Stack(service::update_stack(state(ctx), p, &id, patch).await?))
    }

    async fn stack_delete(&self, ctx: &Context<'_>, id: ID) -> async_graphql::Result<Stack> {
        let p = principal(ctx)?;
        Ok(Stack(service::delete_stack(state(ctx), p, &id).await?))
    }

    async fn stack_lock(&self, ctx: &Context<'_>, id: ID, note: Option<String>) -> async_graphql::Result<Stack> {
        let p = principal(ctx)?;
        Ok(Stack(service::lock_stack(state(ctx), p, &id, note).await?))
    }

    async fn stack_unlock(
        &self,
        ctx: &Context<'_>,
        id: ID,
        #[graphql(default = false)] force: bool,
    ) -> async_graphql::Result<Stack> {
        let p = principal(ctx)?;
        Ok(Stack(service::unlock_stack(state(ctx), p, &id, force).await?))
    }

    async fn run_trigger(
        &self,
        ctx: &Context<'_>,
        stack_id: ID,
        #[graphql(name = "type", default_with = "GqlRunType::Tracked")] run_type: GqlRunType,
        commit_sha: Option<String>,
    ) -> async_graphql::Result<Run> {
        let p = principal(ctx)?;
        let run = service::trigger_run(state(ctx), p, &stack_id, RunType::from(run_type), commit_sha).await?;
        Ok(Run {
            run,
            stack_slug: stack_id.to_string(),
        })
    }

    async fn run_confirm(&self, ctx: &Context<'_>, id: ID) -> async_graphql::Result<Run> {
        decide(ctx, &id, RunEvent::Confirm).await
    }

    async fn run_discard(&self, ctx: &Context<'_>, id: ID) -> async_graphql::Result<Run> {
        decide(ctx, &id, RunEvent::Discard).await
    }

    async fn run_cancel(&self, ctx: &Context<'_>, id: ID) -> async_graphql::Result<Run> {
        decide(ctx, &id, RunEvent::Cancel).await
    }

    /// Creates an organization (instance administrators); the caller becomes its owner.
    async fn org_create(
        &self,
        ctx: &Context<'_>,
        slug: String,
        name: Option<String>,
    ) -> async_graphql::Result<Organization> {
        let p = principal(ctx)?;
        let o = service::create_org(state(ctx), p, &slug, name.as_deref().unwrap_or("")).await?;
        Ok(Organization {
            id: ID(o.id.to_string()),
            slug: o.slug,
            name: o.name,
        })
    }

    /// Adds a user to the organization (owners), creating the account when it is new.
    async fn user_create(
        &self,
        ctx: &Context<'_>,
        email: String,
        name: Option<String>,
        password: Option<String>,
        #[graphql(default = false)] owner: bool,
    ) -> async_graphql::Result<Member> {
        let p = principal(ctx)?;
        let u = service::create_user(state(ctx), p, &email, name, password, owner).await?;
        Ok(Member {
            id: ID(u.id.to_string()),
            email: u.email,
            name: u.name,
            role: if owner { "owner".into() } else { "member".into() },
        })
    }

    /// Makes a member an owner (`owner: true`) or a plain member (owners only; the last
    /// owner can't be demoted).
    async fn member_set_role(&self, ctx: &Context<'_>, email: String, owner: bool) -> async_graphql::Result<Member> {
        let p = principal(ctx)?;
        let u = service::set_member_role(state(ctx), p, &email, owner).await?;
        Ok(Member {
            id: ID(u.id.to_string()),
            email: u.email,
            name: u.name,
            role: if owner { "owner".into() } else { "member".into() },
        })
    }

    /// Removes a member from the organization (owners only; never the last owner).
    async fn member_remove(&self, ctx: &Context<'_>, email: String) -> async_graphql::Result<bool> {
        let p = principal(ctx)?;
        service::remove_member(state(ctx), p, &email).await?;
        Ok(true)
    }

    /// Creates a space under `parent` (root when absent); needs admin on the parent.
    async fn space_create(
        &self,
        ctx: &Context<'_>,
        slug: String,
        name: Option<String>,
        parent: Option<String>,
        #[graphql(default = false)] inherit: bool,
        description: Option<String>,
    ) -> async_graphql::Result<Space> {
        let p = principal(ctx)?;
        let st = state(ctx);
        let s = service::create_space(st, p, &slug, name, parent, inherit, description).await?;
        let all = st.store.scope(p.org).list_spaces().await.map_err(ApiError::from)?;
        Ok(spaces_with_parents(&all, vec![s])
            .pop()
            .ok_or(ApiError::NotFound("space"))?)
    }

    /// Deletes an empty space; needs admin on its parent.
    async fn space_delete(&self, ctx: &Context<'_>, id: ID) -> async_graphql::Result<bool> {
        let p = principal(ctx)?;
        service::delete_space(state(ctx), p, &id).await?;
        Ok(true)
    }

    async fn team_create(&self, ctx: &Context<'_>, slug: String, name: Option<String>) -> async_graphql::Result<Team> {
        let p = principal(ctx)?;
        let st = state(ctx);
        let t = service::create_team(st, p, &slug, name).await?;
        Ok(team_view(st, p, t).await?)
    }

    async fn team_add_member(&self, ctx: &Context<'_>, team: ID, email: String) -> async_graphql::Result<Team> {
        let p = principal(ctx)?;
        let st = state(ctx);
        let t = service::add_team_member(st, p, &team, &email).await?;
        Ok(team_view(st, p, t).await?)
    }

    /// Grants `role` (reader, writer, admin) on a space to a user, team or API key.
    async fn role_grant(
        &self,
        ctx: &Context<'_>,
        space: ID,
        subject: SubjectInput,
        role: String,
    ) -> async_graphql::Result<RoleBinding> {
        let p = principal(ctx)?;
        let st = state(ctx);
        let b = service::grant_role(st, p, &space, subject.into_ref()?, &role).await?;
        Ok(binding_view(st, p, b).await?)
    }

    async fn role_revoke(&self, ctx: &Context<'_>, space: ID, subject: SubjectInput) -> async_graphql::Result<bool> {
        let p = principal(ctx)?;
        service::revoke_role(state(ctx), p, &space, subject.into_ref()?).await?;
        Ok(true)
    }

    /// Creates an API key. Personal keys (the default) act for their creator and never
    /// beyond the creator's rights; service keys (owners only) get a role, organization-wide
    /// or on one space. The secret is returned this once.
    async fn api_key_create(
        &self,
        ctx: &Context<'_>,
        name: String,
        kind: Option<String>,
        role: Option<String>,
        space: Option<String>,
        expires_in_days: Option<i64>,
    ) -> async_graphql::Result<ApiKeyCreated> {
        let p = principal(ctx)?;
        let st = state(ctx);
        let (k, secret) = service::create_api_key(
            st,
            p,
            service::NewKey {
                name,
                kind,
                role,
                space,
                expires_in_days,
            },
        )
        .await?;
        Ok(ApiKeyCreated {
            key: key_view(st, k).await?,
            secret,
        })
    }

    async fn api_key_revoke(&self, ctx: &Context<'_>, id: ID) -> async_graphql::Result<ApiKey> {
        let p = principal(ctx)?;
        let st = state(ctx);
        let k = service::revoke_api_key(st, p, &id).await?;
        Ok(key_view(st, k).await?)
    }

    /// Releases the stack's Terraform state lock whoever holds it (admin only): the way out
    /// after a runner died mid-apply.
    async fn state_force_unlock(&self, ctx: &Context<'_>, stack_id: ID) -> async_graphql::Result<StateLockInfo> {
        let p = principal(ctx)?;
        Ok(service::force_unlock_state(state(ctx), p, &stack_id).await?.into())
    }
}

async fn decide(ctx: &Context<'_>, id: &ID, event: RunEvent) -> async_graphql::Result<Run> {
    let p = principal(ctx)?;
    let id = parse_run_id(id)?;
    // Reading first makes another organization's run a plain "not found".
    load_run(ctx, id).await?;
    service::decide_run(state(ctx), p, id, event).await?;
    Ok(load_run(ctx, id).await?)
}

pub struct SubscriptionRoot;

const POLL: Duration = Duration::from_millis(1000);

#[Subscription]
impl SubscriptionRoot {
    /// Log chunks of a run as they arrive, starting after `afterSeq`; ends when the run has
    /// ended and every chunk was sent.
    async fn run_logs(
        &self,
        ctx: &Context<'_>,
        run_id: ID,
        after_seq: Option<i64>,
    ) -> async_graphql::Result<impl Stream<Item = LogChunk> + use<>> {
        let p = principal(ctx)?.clone();
        let st = state(ctx).clone();
        let id = parse_run_id(&run_id)?;
        service::get_run(&st, &p, id, Action::Read).await?;
        let mut rx = st.bus.subscribe();
        Ok(async_stream::stream! {
            let mut last = after_seq;
            loop {
                let scope = st.store.scope(p.org);
                // Read the state before the logs: chunks written before the run ended are
                // then certainly in the read that follows.
                let ended = scope.get_run(id).await.map(|r| r.state.is_terminal()).unwrap_or(true);
                let Ok(chunks) = scope.list_logs(id, last, 1000).await else { break };
                let n = chunks.len();
                for c in chunks {
                    last = Some(c.seq);
                    yield LogChunk::from(c);
                }
                if n == 1000 { continue; }
                if ended { break; }
                wait_for(&mut rx, id).await;
            }
        })
    }

    /// The run each time its state changes; ends after a terminal state.
    async fn run_state_changed(
        &self,
        ctx: &Context<'_>,
        run_id: ID,
    ) -> async_graphql::Result<impl Stream<Item = Run> + use<>> {
        let p = principal(ctx)?.clone();
        let st = state(ctx).clone();
        let id = parse_run_id(&run_id)?;
        let slug = service::get_run(&st, &p, id, Action::Read).await?.1.slug;
        let mut rx = st.bus.subscribe();
        Ok(async_stream::stream! {
            let mut seen: Option<RunState> = None;
            loop {
                let scope = st.store.scope(p.org);
                let Ok(run) = scope.get_run(id).await else { break };
                let terminal = run.state.is_terminal();
                if seen != Some(run.state) {
                    seen = Some(run.state);
                    yield Run { run, stack_slug: slug.clone() };
                }
                if terminal { break; }
                wait_for(&mut rx, id).await;
            }
        })
    }
}

async fn wait_for(rx: &mut tokio::sync::broadcast::Receiver<crate::bus::BusEvent>, id: RunId) {
    let deadline = tokio::time::sleep(POLL);
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            _ = &mut deadline => return,
            ev = rx.recv() => match ev {
                Ok(e) if e.run_id() == id => return,
                Ok(_) => {}
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => return,
                Err(_) => { (&mut deadline).await; return; }
            }
        }
    }
}
