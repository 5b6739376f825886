//! Typed async client of the Terraplane API (GraphQL at `{endpoint}/graphql`, the state
//! backend under `{endpoint}/api/v1`), used by `tpctl` and the tests.
//! One method per operation; errors keep the server's stable codes (see [`ClientError`]).

mod error;
mod types;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use reqwest::{StatusCode, Url, header};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

pub use error::ClientError;
pub use types::*;

pub type Result<T, E = ClientError> = std::result::Result<T, E>;

/// The most log chunks the server returns for one `logs` field.
pub const LOGS_PAGE_LIMIT: usize = 1000;

/// How many of its latest evaluations [`Client::policy`] reads with a policy.
pub const POLICY_EVALUATIONS_LIMIT: usize = 20;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

// Field selections, spelled once; `concat!` needs literals, hence macros.
macro_rules! org_fields {
    () => {
        "id slug name"
    };
}
macro_rules! stack_fields {
    () => {
        "id name description repository branch projectRoot tool toolVersion autodeploy labels \
         workerPool lock { holder note lockedAt } driftStatus driftReaction driftCheckedAt createdAt updatedAt"
    };
}
macro_rules! state_lock_fields {
    () => {
        "id holder info runId needsRecovery createdAt"
    };
}
macro_rules! run_fields {
    () => {
        "id stackId type state terminal commitSha triggeredBy driftDetection \
         planSummary { add change destroy } hasChanges error outputs runnerId createdAt updatedAt"
    };
}
macro_rules! state_version_fields {
    () => {
        "serial version lineage md5 sha256 size outputs runId createdBy createdAt"
    };
}

macro_rules! space_fields {
    () => {
        "id name description parent inherit createdAt"
    };
}
macro_rules! team_fields {
    () => {
        "id name members"
    };
}
macro_rules! member_fields {
    () => {
        "id email name role"
    };
}
macro_rules! role_binding_fields {
    () => {
        "space subjectKind subject role createdAt"
    };
}
macro_rules! audit_event_fields {
    () => {
        "id seq actor action targetKind target before after requestId clientIp at hash prevHash"
    };
}
macro_rules! api_key_fields {
    () => {
        "id name kind role owner createdAt expiresAt lastUsedAt revokedAt"
    };
}
macro_rules! variable_fields {
    () => {
        "name kind secret applyOnly value checksum updatedAt"
    };
}
macro_rules! effective_variable_fields {
    () => {
        "name kind secret applyOnly value checksum source priority autoAttached"
    };
}
macro_rules! context_attachment_fields {
    () => {
        "context stack priority autoAttached"
    };
}
macro_rules! context_fields {
    () => {
        concat!(
            "id name description labels space variables { ",
            variable_fields!(),
            " } attachments { ",
            context_attachment_fields!(),
            " } createdAt"
        )
    };
}
macro_rules! aws_integration_fields {
    () => {
        "id name space roleArn readRoleArn audience durationSeconds stacks"
    };
}
macro_rules! drift_schedule_fields {
    () => {
        "id stack cron timezone nextRunAt"
    };
}
macro_rules! drift_record_fields {
    () => {
        "id stack open resources { address action attributes } lastRunId firstSeenAt lastSeenAt \
         resolvedAt resolvedByRunId"
    };
}
macro_rules! notification_endpoint_fields {
    () => {
        "id name kind url space events stackLabels hasSecret createdAt"
    };
}
macro_rules! notification_delivery_fields {
    () => {
        "id endpoint event stack runId status attempts lastStatusCode lastError nextAttemptAt \
         createdAt deliveredAt"
    };
}

macro_rules! policy_fields {
    () => {
        "id name type description labels body version space createdAt updatedAt"
    };
}
macro_rules! policy_evaluation_fields {
    () => {
        "id policy policyVersion type runId subject inputHash outcome messages result createdAt"
    };
}
macro_rules! run_review_fields {
    () => {
        "reviewer teams stage decision note createdAt"
    };
}
macro_rules! policy_attachment_fields {
    () => {
        "policy stack"
    };
}

/// A connection to one Terraplane endpoint, optionally authenticated. Cheap to clone;
/// clones share a session set up with [`Client::with_session`].
#[derive(Clone, Debug)]
pub struct Client {
    http: reqwest::Client,
    endpoint: Url,
    token: Option<String>,
    session: Option<Arc<Session>>,
}

/// Keeps a renewed session (its new access and refresh token) somewhere; an `Err` fails the
/// call that needed the renewal with [`ClientError::SessionSave`].
pub type SessionSaver = dyn Fn(&LoginResult) -> std::result::Result<(), String> + Send + Sync;

/// A login session the client renews by itself when its access token expires.
struct Session {
    /// The access token requests carry now.
    access: std::sync::Mutex<String>,
    /// The current refresh token. Held across the `refresh` call, so concurrent requests
    /// never present the same (rotating) refresh token twice, which would end the session.
    refresh: tokio::sync::Mutex<String>,
    save: Box<SessionSaver>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Session { <redacted> }")
    }
}

impl Session {
    fn access(&self) -> String {
        self.access.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

#[derive(Deserialize)]
struct GraphqlResponse {
    data: Option<Value>,
    #[serde(default)]
    errors: Vec<GraphqlError>,
}

#[derive(Deserialize)]
struct GraphqlError {
    message: String,
    #[serde(default)]
    extensions: Option<Value>,
}

#[derive(Deserialize)]
struct ErrorBody {
    code: String,
    message: String,
}

impl Client {
    /// `endpoint` is the server's base URL (`https://terraplane.example.com`); `token` a
    /// session token from [`Client::login`] or an API key.
    pub fn new(endpoint: &str, token: Option<String>) -> Result<Self> {
        let invalid = |reason: String| ClientError::InvalidEndpoint {
            endpoint: endpoint.to_owned(),
            reason,
        };
        let mut url = Url::parse(endpoint.trim()).map_err(|e| invalid(e.to_string()))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(invalid("the scheme must be http or https".into()));
        }
        if url.cannot_be_a_base() {
            return Err(invalid("not a base URL".into()));
        }
        // A trailing slash makes `join` append instead of replacing the last segment.
        if !url.path().ends_with('/') {
            let path = format!("{}/", url.path());
            url.set_path(&path);
        }
        url.set_query(None);
        url.set_fragment(None);
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            .user_agent(concat!("terraplane-client/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(ClientError::Transport)?;
        Ok(Self {
            http,
            endpoint: url,
            token: token.filter(|t| !t.is_empty()),
            session: None,
        })
    }

    /// The same endpoint with another credential (e.g. the token `login` returned), without
    /// any session renewal.
    pub fn with_token(&self, token: Option<String>) -> Self {
        Self {
            http: self.http.clone(),
            endpoint: self.endpoint.clone(),
            token: token.filter(|t| !t.is_empty()),
            session: None,
        }
    }

    /// Makes the client's token (an access token from [`Client::login`]) a renewable
    /// session: when a request is refused because the access token expired, the client
    /// calls [`Client::refresh`] with `refresh_token`, hands the result to `save`, and
    /// retries that request once with the new access token. A failed renewal is
    /// [`ClientError::SessionRenewal`]. Without a token this does nothing.
    pub fn with_session(
        self,
        refresh_token: String,
        save: impl Fn(&LoginResult) -> std::result::Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        let Some(access) = self.token.clone() else {
            return self;
        };
        let session = Session {
            access: std::sync::Mutex::new(access),
            refresh: tokio::sync::Mutex::new(refresh_token),
            save: Box::new(save),
        };
        Self {
            session: Some(Arc::new(session)),
            ..self
        }
    }

    /// The base URL, always ending in `/`.
    pub fn endpoint(&self) -> &str {
        self.endpoint.as_str()
    }

    /// The credential requests carry now (a renewed session's latest access token).
    pub fn token(&self) -> Option<String> {
        match &self.session {
            Some(s) => Some(s.access()),
            None => self.token.clone(),
        }
    }

    fn url(&self, path: &str) -> Result<Url> {
        self.endpoint.join(path).map_err(|e| ClientError::InvalidEndpoint {
            endpoint: self.endpoint.to_string(),
            reason: e.to_string(),
        })
    }

    /// Runs `op` with the current credential. With a session, an expired access token is
    /// renewed and `op` retried once with the new one.
    async fn authenticated<T, F, Fut>(&self, op: F) -> Result<T>
    where
        F: Fn(Option<String>) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let used = self.token();
        match op(used.clone()).await {
            Err(e) if self.session.is_some() && e.is_token_expired() => {
                let fresh = self.renew(used.as_deref()).await?;
                op(Some(fresh)).await
            }
            r => r,
        }
    }

    /// A new access token for the session, `used` being the one the server found expired.
    async fn renew(&self, used: Option<&str>) -> Result<String> {
        let Some(session) = &self.session else {
            return Err(ClientError::api("unauthenticated", "token expired"));
        };
        let mut refresh = session.refresh.lock().await;
        // Another request renewed the session while this one waited for the lock.
        let current = session.access();
        if used != Some(current.as_str()) {
            return Ok(current);
        }
        let renewed = match self.refresh(&refresh).await {
            Ok(r) => r,
            Err(e) => return Err(ClientError::SessionRenewal { source: Box::new(e) }),
        };
        let Some(next) = renewed.refresh_token.clone().filter(|t| !t.is_empty()) else {
            return Err(ClientError::SessionRenewal {
                source: Box::new(ClientError::Decode("refresh returned no refresh token".into())),
            });
        };
        *refresh = next;
        *session.access.lock().unwrap_or_else(|e| e.into_inner()) = renewed.token.clone();
        (session.save)(&renewed).map_err(ClientError::SessionSave)?;
        Ok(renewed.token)
    }

    /// Runs one GraphQL operation and decodes its `data`. Any entry in `errors[]` fails the
    /// call with [`ClientError::Api`] (code from `extensions.code`, `graphql` without one).
    pub async fn graphql<T: DeserializeOwned>(&self, query: &str, variables: Value) -> Result<T> {
        let body = json!({ "query": query, "variables": variables });
        self.authenticated(|token| self.graphql_once(&body, token)).await
    }

    async fn graphql_once<T: DeserializeOwned>(&self, body: &Value, token: Option<String>) -> Result<T> {
        let url = self.url("graphql")?;
        let resp = authorize(self.http.post(url), token.as_deref())
            .header(header::ACCEPT, "application/json")
            .json(body)
            .send()
            .await?;
        let status = resp.status();
        let body = resp.bytes().await?;
        // Some failures (bad request, auth middleware) come with a non-2xx status and either
        // a GraphQL body or a REST error body; prefer whichever explains more.
        let parsed: Option<GraphqlResponse> = serde_json::from_slice(&body).ok();
        match parsed {
            Some(r) if !r.errors.is_empty() => Err(graphql_errors(r.errors)),
            Some(GraphqlResponse { data: Some(data), .. }) if status.is_success() => {
                serde_json::from_value(data).map_err(|e| ClientError::Decode(e.to_string()))
            }
            _ if !status.is_success() => Err(http_error(status, &body)),
            _ => Err(ClientError::Decode(format!(
                "GraphQL response without data or errors: {}",
                String::from_utf8_lossy(&body)
            ))),
        }
    }

    /// Runs `query` and decodes the top-level field `name` of its data.
    async fn field<T: DeserializeOwned>(&self, query: &str, variables: Value, name: &str) -> Result<T> {
        take_field(&mut self.graphql(query, variables).await?, name)
    }

    /// Exchanges email and password for a session token in `organization` (default: the
    /// user's first organization). The client itself keeps its credential; see
    /// [`Client::with_token`].
    pub async fn login(&self, email: &str, password: &str, organization: Option<&str>) -> Result<LoginResult> {
        const Q: &str = concat!(
            "mutation($email: String!, $password: String!, $organization: String) { ",
            "login(email: $email, password: $password, organization: $organization) { ",
            "token refreshToken expiresAt organization { ",
            org_fields!(),
            " } } }"
        );
        self.field(
            Q,
            json!({ "email": email, "password": password, "organization": organization }),
            "login",
        )
        .await
    }

    /// Exchanges a refresh token for a new access token and a new refresh token. The old
    /// refresh token stops working; presenting it again ends the session. Sent without the
    /// client's credential (an expired access token must not get in the way).
    pub async fn refresh(&self, refresh_token: &str) -> Result<LoginResult> {
        const Q: &str = concat!(
            "mutation($refreshToken: String!) { refresh(refreshToken: $refreshToken) { ",
            "token refreshToken expiresAt organization { ",
            org_fields!(),
            " } } }"
        );
        // Straight to `graphql_once`: no credential, and no renewal of its own.
        let body = json!({ "query": Q, "variables": { "refreshToken": refresh_token } });
        let mut data = self.graphql_once(&body, None).await?;
        take_field(&mut data, "refresh")
    }

    /// Ends the caller's login session: its access and refresh tokens stop working. An API
    /// key is refused with `bad_request`.
    pub async fn logout(&self) -> Result<()> {
        const Q: &str = "mutation { logout }";
        let done: bool = self.field(Q, json!({}), "logout").await?;
        confirmed(done, "logout")
    }

    pub async fn me(&self) -> Result<Viewer> {
        const Q: &str = concat!("query { me { id name role organization { ", org_fields!(), " } } }");
        self.field(Q, json!({}), "me").await
    }

    pub async fn stacks(&self) -> Result<Vec<Stack>> {
        const Q: &str = concat!("query { stacks { ", stack_fields!(), " } }");
        self.field(Q, json!({}), "stacks").await
    }

    /// The stack with this slug, with its state lock; `None` when there is none.
    pub async fn stack(&self, id: &str) -> Result<Option<Stack>> {
        const Q: &str = concat!(
            "query($id: ID!) { stack(id: $id) { ",
            stack_fields!(),
            " stateLock { ",
            state_lock_fields!(),
            " } } }"
        );
        self.field(Q, json!({ "id": id }), "stack").await
    }

    pub async fn stack_create(&self, input: &StackCreateInput) -> Result<Stack> {
        const Q: &str = concat!(
            "mutation($input: StackCreateInput!) { stackCreate(input: $input) { ",
            stack_fields!(),
            " } }"
        );
        self.field(Q, json!({ "input": input }), "stackCreate").await
    }

    pub async fn stack_update(&self, id: &str, input: &StackUpdateInput) -> Result<Stack> {
        const Q: &str = concat!(
            "mutation($id: ID!, $input: StackUpdateInput!) { stackUpdate(id: $id, input: $input) { ",
            stack_fields!(),
            " } }"
        );
        self.field(Q, json!({ "id": id, "input": input }), "stackUpdate").await
    }

    /// Deletes the stack and returns it as it was.
    pub async fn stack_delete(&self, id: &str) -> Result<Stack> {
        const Q: &str = concat!("mutation($id: ID!) { stackDelete(id: $id) { ", stack_fields!(), " } }");
        self.field(Q, json!({ "id": id }), "stackDelete").await
    }

    pub async fn stack_lock(&self, id: &str, note: Option<&str>) -> Result<Stack> {
        const Q: &str = concat!(
            "mutation($id: ID!, $note: String) { stackLock(id: $id, note: $note) { ",
            stack_fields!(),
            " } }"
        );
        self.field(Q, json!({ "id": id, "note": note }), "stackLock").await
    }

    /// Releases the stack lock; `force` releases someone else's (admin).
    pub async fn stack_unlock(&self, id: &str, force: bool) -> Result<Stack> {
        const Q: &str = concat!(
            "mutation($id: ID!, $force: Boolean!) { stackUnlock(id: $id, force: $force) { ",
            stack_fields!(),
            " } }"
        );
        self.field(Q, json!({ "id": id, "force": force }), "stackUnlock").await
    }

    /// Triggers a tracked run, or a proposed (plan-only) one, on the branch's head.
    pub async fn run_trigger(&self, stack_id: &str, proposed: bool) -> Result<Run> {
        let t = if proposed { RunType::Proposed } else { RunType::Tracked };
        self.run_trigger_with(stack_id, &t, None).await
    }

    /// Triggers a run of any type, optionally at a given commit.
    pub async fn run_trigger_with(&self, stack_id: &str, run_type: &RunType, commit_sha: Option<&str>) -> Result<Run> {
        // The enum is inlined as a literal so the query doesn't depend on the schema's name
        // for the enum type; only plain enum names are allowed through.
        let t = run_type.as_str();
        if t.is_empty() || !t.bytes().all(|b| b.is_ascii_uppercase() || b == b'_') {
            return Err(ClientError::api("bad_request", format!("invalid run type {t:?}")));
        }
        let q = format!(
            "mutation($stackId: ID!, $commitSha: String) {{ runTrigger(stackId: $stackId, type: {t}, commitSha: $commitSha) {{ {} }} }}",
            run_fields!()
        );
        self.field(
            &q,
            json!({ "stackId": stack_id, "commitSha": commit_sha }),
            "runTrigger",
        )
        .await
    }

    /// The stack's latest runs, newest first.
    pub async fn runs(&self, stack_id: &str, limit: u64) -> Result<Vec<Run>> {
        const Q: &str = concat!(
            "query($stackId: ID!, $limit: Int!) { runs(stackId: $stackId, limit: $limit) { ",
            run_fields!(),
            " } }"
        );
        self.field(Q, json!({ "stackId": stack_id, "limit": limit }), "runs")
            .await
    }

    /// The run with its state-change events; `None` when there is none.
    pub async fn run(&self, id: &str) -> Result<Option<Run>> {
        const Q: &str = concat!(
            "query($id: ID!) { run(id: $id) { ",
            run_fields!(),
            " events { state note at } } }"
        );
        self.field(Q, json!({ "id": id }), "run").await
    }

    /// Log chunks after `after_seq` (from the start when `None`), at most
    /// [`LOGS_PAGE_LIMIT`]. An unknown run is `not_found`.
    pub async fn logs(&self, run_id: &str, after_seq: Option<i64>) -> Result<Vec<LogChunk>> {
        let page = self.run_logs(run_id, after_seq).await?;
        Ok(page.logs)
    }

    /// The run's state and its log chunks after `after_seq`, in one request: what
    /// `logs --follow` polls. An unknown run is `not_found`.
    pub async fn run_logs(&self, run_id: &str, after_seq: Option<i64>) -> Result<RunLogs> {
        const Q: &str = "query($id: ID!, $afterSeq: Int, $limit: Int!) { run(id: $id) { state terminal \
                         logs(afterSeq: $afterSeq, limit: $limit) { seq phase data createdAt } } }";
        let page: Option<RunLogs> = self
            .field(
                Q,
                json!({ "id": run_id, "afterSeq": after_seq, "limit": LOGS_PAGE_LIMIT }),
                "run",
            )
            .await?;
        page.ok_or_else(|| ClientError::api("not_found", "run not found"))
    }

    pub async fn run_confirm(&self, id: &str) -> Result<Run> {
        const Q: &str = concat!("mutation($id: ID!) { runConfirm(id: $id) { ", run_fields!(), " } }");
        self.field(Q, json!({ "id": id }), "runConfirm").await
    }

    pub async fn run_discard(&self, id: &str) -> Result<Run> {
        const Q: &str = concat!("mutation($id: ID!) { runDiscard(id: $id) { ", run_fields!(), " } }");
        self.field(Q, json!({ "id": id }), "runDiscard").await
    }

    pub async fn run_cancel(&self, id: &str) -> Result<Run> {
        const Q: &str = concat!("mutation($id: ID!) { runCancel(id: $id) { ", run_fields!(), " } }");
        self.field(Q, json!({ "id": id }), "runCancel").await
    }

    /// Approves or rejects a run held, or about to be held, by approval policies (QUEUED,
    /// PENDING_REVIEW or UNCONFIRMED; another state is `invalid_run_state`), returning the run
    /// as the review left it.
    pub async fn run_review(&self, id: &str, approve: bool, note: Option<&str>) -> Result<Run> {
        const Q: &str = concat!(
            "mutation($id: ID!, $decision: ReviewDecision!, $note: String) { ",
            "runReview(id: $id, decision: $decision, note: $note) { ",
            run_fields!(),
            " } }"
        );
        let decision = if approve {
            ReviewDecision::Approve
        } else {
            ReviewDecision::Reject
        };
        self.field(Q, json!({ "id": id, "decision": decision, "note": note }), "runReview")
            .await
    }

    /// The reviews of a run, oldest first; an unknown run is `not_found`.
    pub async fn run_reviews(&self, run_id: &str) -> Result<Vec<RunReview>> {
        const Q: &str = concat!(
            "query($id: ID!) { run(id: $id) { reviews { ",
            run_review_fields!(),
            " } } }"
        );
        #[derive(Deserialize)]
        struct Reviews {
            reviews: Vec<RunReview>,
        }
        let run: Option<Reviews> = self.field(Q, json!({ "id": run_id }), "run").await?;
        run.map(|r| r.reviews)
            .ok_or_else(|| ClientError::api("not_found", format!("run {run_id} not found")))
    }

    pub async fn state_versions(&self, stack_id: &str) -> Result<Vec<StateVersion>> {
        const Q: &str = concat!(
            "query($stackId: ID!) { stateVersions(stackId: $stackId) { ",
            state_version_fields!(),
            " } }"
        );
        self.field(Q, json!({ "stackId": stack_id }), "stateVersions").await
    }

    /// Releases the stack's Terraform state lock whoever holds it (admin), returning the lock
    /// that was released.
    pub async fn state_force_unlock(&self, stack_id: &str) -> Result<StateLockInfo> {
        const Q: &str = concat!(
            "mutation($stackId: ID!) { stateForceUnlock(stackId: $stackId) { ",
            state_lock_fields!(),
            " } }"
        );
        self.field(Q, json!({ "stackId": stack_id }), "stateForceUnlock").await
    }

    /// The caller's organizations (every organization for instance administrators).
    pub async fn organizations(&self) -> Result<Vec<Organization>> {
        const Q: &str = concat!("query { organizations { ", org_fields!(), " } }");
        self.field(Q, json!({}), "organizations").await
    }

    /// Creates an organization (instance administrators) with the caller as its owner;
    /// `name` defaults to the slug. Working in it needs a token for it: see
    /// [`Client::login`].
    pub async fn org_create(&self, slug: &str, name: Option<&str>) -> Result<Organization> {
        const Q: &str = concat!(
            "mutation($slug: String!, $name: String) { orgCreate(slug: $slug, name: $name) { ",
            org_fields!(),
            " } }"
        );
        self.field(Q, json!({ "slug": slug, "name": name }), "orgCreate").await
    }

    /// The spaces the caller can see.
    pub async fn spaces(&self) -> Result<Vec<Space>> {
        const Q: &str = concat!("query { spaces { ", space_fields!(), " } }");
        self.field(Q, json!({}), "spaces").await
    }

    /// The space with this slug; `None` when there is none (or it is invisible to the caller).
    pub async fn space(&self, id: &str) -> Result<Option<Space>> {
        const Q: &str = concat!("query($id: ID!) { space(id: $id) { ", space_fields!(), " } }");
        self.field(Q, json!({ "id": id }), "space").await
    }

    /// Creates a space (admin on the parent).
    pub async fn space_create(&self, input: &SpaceCreate) -> Result<Space> {
        const Q: &str = concat!(
            "mutation($slug: String!, $name: String, $parent: String, $inherit: Boolean!, $description: String) { ",
            "spaceCreate(slug: $slug, name: $name, parent: $parent, inherit: $inherit, description: $description) { ",
            space_fields!(),
            " } }"
        );
        // The argument structs name their fields like the operation's variables.
        self.field(Q, json!(input), "spaceCreate").await
    }

    /// Deletes an empty space (admin on its parent).
    pub async fn space_delete(&self, id: &str) -> Result<()> {
        const Q: &str = "mutation($id: ID!) { spaceDelete(id: $id) }";
        let done: bool = self.field(Q, json!({ "id": id }), "spaceDelete").await?;
        confirmed(done, "spaceDelete")
    }

    pub async fn teams(&self) -> Result<Vec<Team>> {
        const Q: &str = concat!("query { teams { ", team_fields!(), " } }");
        self.field(Q, json!({}), "teams").await
    }

    /// Creates a team (owners); `name` defaults to the slug.
    pub async fn team_create(&self, slug: &str, name: Option<&str>) -> Result<Team> {
        const Q: &str = concat!(
            "mutation($slug: String!, $name: String) { teamCreate(slug: $slug, name: $name) { ",
            team_fields!(),
            " } }"
        );
        self.field(Q, json!({ "slug": slug, "name": name }), "teamCreate").await
    }

    /// Adds a member of the organization to a team, returning the team as it is now.
    pub async fn team_add_member(&self, team: &str, email: &str) -> Result<Team> {
        const Q: &str = concat!(
            "mutation($team: ID!, $email: String!) { teamAddMember(team: $team, email: $email) { ",
            team_fields!(),
            " } }"
        );
        self.field(Q, json!({ "team": team, "email": email }), "teamAddMember")
            .await
    }

    /// The organization's members.
    pub async fn users(&self) -> Result<Vec<Member>> {
        const Q: &str = concat!("query { users { ", member_fields!(), " } }");
        self.field(Q, json!({}), "users").await
    }

    /// Adds a user to the organization (owners), creating the account when it is new.
    pub async fn user_create(&self, input: &UserCreate) -> Result<Member> {
        const Q: &str = concat!(
            "mutation($email: String!, $name: String, $password: String, $owner: Boolean!) { ",
            "userCreate(email: $email, name: $name, password: $password, owner: $owner) { ",
            member_fields!(),
            " } }"
        );
        self.field(Q, json!(input), "userCreate").await
    }

    /// Makes a member an owner of the organization (`owner`) or a plain member (owners).
    /// Demoting the last owner is refused with `last_owner`.
    pub async fn member_set_role(&self, email: &str, owner: bool) -> Result<Member> {
        const Q: &str = concat!(
            "mutation($email: String!, $owner: Boolean!) { memberSetRole(email: $email, owner: $owner) { ",
            member_fields!(),
            " } }"
        );
        self.field(Q, json!({ "email": email, "owner": owner }), "memberSetRole")
            .await
    }

    /// Removes a member from the organization with their team memberships, role bindings
    /// and sessions (owners). Removing the last owner is refused with `last_owner`.
    pub async fn member_remove(&self, email: &str) -> Result<()> {
        const Q: &str = "mutation($email: String!) { memberRemove(email: $email) }";
        let done: bool = self.field(Q, json!({ "email": email }), "memberRemove").await?;
        confirmed(done, "memberRemove")
    }

    /// Role bindings on the spaces the caller administers.
    pub async fn role_bindings(&self) -> Result<Vec<RoleBinding>> {
        const Q: &str = concat!("query { roleBindings { ", role_binding_fields!(), " } }");
        self.field(Q, json!({}), "roleBindings").await
    }

    /// Grants `role` (`reader`, `writer`, `admin`) on a space; replaces the subject's
    /// previous role there.
    pub async fn role_grant(&self, space: &str, subject: &Subject, role: &str) -> Result<RoleBinding> {
        const Q: &str = concat!(
            "mutation($space: ID!, $subject: SubjectInput!, $role: String!) { ",
            "roleGrant(space: $space, subject: $subject, role: $role) { ",
            role_binding_fields!(),
            " } }"
        );
        self.field(
            Q,
            json!({ "space": space, "subject": subject, "role": role }),
            "roleGrant",
        )
        .await
    }

    /// Removes the subject's role on a space.
    pub async fn role_revoke(&self, space: &str, subject: &Subject) -> Result<()> {
        const Q: &str =
            "mutation($space: ID!, $subject: SubjectInput!) { roleRevoke(space: $space, subject: $subject) }";
        let done: bool = self
            .field(Q, json!({ "space": space, "subject": subject }), "roleRevoke")
            .await?;
        confirmed(done, "roleRevoke")
    }

    /// API keys: every key for owners, the caller's personal keys otherwise.
    pub async fn api_keys(&self) -> Result<Vec<ApiKey>> {
        const Q: &str = concat!("query { apiKeys { ", api_key_fields!(), " } }");
        self.field(Q, json!({}), "apiKeys").await
    }

    /// Creates an API key; the result holds its secret, which the server never shows again.
    pub async fn api_key_create(&self, input: &ApiKeyCreate) -> Result<ApiKeyCreated> {
        const Q: &str = concat!(
            "mutation($name: String!, $kind: String, $role: String, $space: String, $expiresInDays: Int) { ",
            "apiKeyCreate(name: $name, kind: $kind, role: $role, space: $space, expiresInDays: $expiresInDays) { ",
            "secret key { ",
            api_key_fields!(),
            " } } }"
        );
        self.field(Q, json!(input), "apiKeyCreate").await
    }

    /// Revokes an API key at once, returning it as it is now.
    pub async fn api_key_revoke(&self, id: &str) -> Result<ApiKey> {
        const Q: &str = concat!(
            "mutation($id: ID!) { apiKeyRevoke(id: $id) { ",
            api_key_fields!(),
            " } }"
        );
        self.field(Q, json!({ "id": id }), "apiKeyRevoke").await
    }

    /// The organization's audit trail matching `q`, newest first (owners; others get
    /// `forbidden`).
    pub async fn audit_events(&self, q: &AuditQuery) -> Result<Vec<AuditEvent>> {
        // `limit` is `Int! = 100` in the schema: a nullable variable needs a default of its
        // own to go there, and an unset limit is left out of the variables.
        const Q: &str = concat!(
            "query($actor: String, $action: String, $target: String, $since: DateTime, $until: DateTime, ",
            "$limit: Int = 100) { ",
            "auditEvents(actor: $actor, action: $action, target: $target, since: $since, until: $until, limit: $limit) { ",
            audit_event_fields!(),
            " } }"
        );
        self.field(Q, json!(q), "auditEvents").await
    }

    /// Recomputes the audit chain (owners). A broken chain is an `Ok` answer with
    /// `ok: false` naming the first event altered or removed.
    pub async fn audit_verify(&self) -> Result<AuditVerification> {
        const Q: &str = "query { auditVerify { ok events problem seq eventId } }";
        self.field(Q, json!({}), "auditVerify").await
    }

    /// The contexts the caller can see, with their variables (secrets without values) and
    /// attachments.
    pub async fn contexts(&self) -> Result<Vec<Context>> {
        const Q: &str = concat!("query { contexts { ", context_fields!(), " } }");
        self.field(Q, json!({}), "contexts").await
    }

    /// The context with this id; an unknown one is `not_found`.
    pub async fn context(&self, id: &str) -> Result<Context> {
        const Q: &str = concat!("query($id: String!) { context(id: $id) { ", context_fields!(), " } }");
        self.field(Q, json!({ "id": id }), "context").await
    }

    pub async fn context_create(&self, input: &ContextCreateInput) -> Result<Context> {
        const Q: &str = concat!(
            "mutation($input: ContextCreateInput!) { contextCreate(input: $input) { ",
            context_fields!(),
            " } }"
        );
        self.field(Q, json!({ "input": input }), "contextCreate").await
    }

    /// Deletes the context and returns it as it was.
    pub async fn context_delete(&self, id: &str) -> Result<Context> {
        const Q: &str = concat!(
            "mutation($id: String!) { contextDelete(id: $id) { ",
            context_fields!(),
            " } }"
        );
        self.field(Q, json!({ "id": id }), "contextDelete").await
    }

    /// Sets (adds or replaces) a variable of a context.
    pub async fn context_set_variable(&self, context: &str, input: &VariableInput) -> Result<Variable> {
        const Q: &str = concat!(
            "mutation($context: String!, $input: VariableInput!) { ",
            "contextSetVariable(context: $context, input: $input) { ",
            variable_fields!(),
            " } }"
        );
        self.field(Q, json!({ "context": context, "input": input }), "contextSetVariable")
            .await
    }

    /// Removes a variable from a context, returning it as it was.
    pub async fn context_unset_variable(&self, context: &str, name: &str) -> Result<Variable> {
        const Q: &str = concat!(
            "mutation($context: String!, $name: String!) { ",
            "contextUnsetVariable(context: $context, name: $name) { ",
            variable_fields!(),
            " } }"
        );
        self.field(Q, json!({ "context": context, "name": name }), "contextUnsetVariable")
            .await
    }

    /// Attaches a context to a stack; of two attached contexts setting the same variable,
    /// the lower `priority` number wins (0 beats 1; the schema's default is 0). The stack's
    /// own values beat every context's.
    pub async fn context_attach(&self, context: &str, stack_id: &str, priority: i32) -> Result<ContextAttachment> {
        const Q: &str = concat!(
            "mutation($context: String!, $stackId: String!, $priority: Int!) { ",
            "contextAttach(context: $context, stackId: $stackId, priority: $priority) { ",
            context_attachment_fields!(),
            " } }"
        );
        self.field(
            Q,
            json!({ "context": context, "stackId": stack_id, "priority": priority }),
            "contextAttach",
        )
        .await
    }

    /// Detaches a context from a stack, returning the attachment as it was.
    pub async fn context_detach(&self, context: &str, stack_id: &str) -> Result<ContextAttachment> {
        const Q: &str = concat!(
            "mutation($context: String!, $stackId: String!) { ",
            "contextDetach(context: $context, stackId: $stackId) { ",
            context_attachment_fields!(),
            " } }"
        );
        self.field(Q, json!({ "context": context, "stackId": stack_id }), "contextDetach")
            .await
    }

    /// The stack's own variables, without those of its contexts.
    pub async fn stack_variables(&self, stack_id: &str) -> Result<Vec<Variable>> {
        const Q: &str = concat!(
            "query($stackId: String!) { stackVariables(stackId: $stackId) { ",
            variable_fields!(),
            " } }"
        );
        self.field(Q, json!({ "stackId": stack_id }), "stackVariables").await
    }

    /// The variables the stack's runs get: its own and its contexts', merged by precedence,
    /// ordered by kind then name.
    pub async fn stack_environment(&self, stack_id: &str) -> Result<Vec<EffectiveVariable>> {
        const Q: &str = concat!(
            "query($stackId: String!) { stackEnvironment(stackId: $stackId) { ",
            effective_variable_fields!(),
            " } }"
        );
        self.field(Q, json!({ "stackId": stack_id }), "stackEnvironment").await
    }

    /// Sets (adds or replaces) one of the stack's own variables.
    pub async fn stack_set_variable(&self, stack_id: &str, input: &VariableInput) -> Result<Variable> {
        const Q: &str = concat!(
            "mutation($stackId: String!, $input: VariableInput!) { ",
            "stackSetVariable(stackId: $stackId, input: $input) { ",
            variable_fields!(),
            " } }"
        );
        self.field(Q, json!({ "stackId": stack_id, "input": input }), "stackSetVariable")
            .await
    }

    /// Removes one of the stack's own variables, returning it as it was.
    pub async fn stack_unset_variable(&self, stack_id: &str, name: &str) -> Result<Variable> {
        const Q: &str = concat!(
            "mutation($stackId: String!, $name: String!) { ",
            "stackUnsetVariable(stackId: $stackId, name: $name) { ",
            variable_fields!(),
            " } }"
        );
        self.field(Q, json!({ "stackId": stack_id, "name": name }), "stackUnsetVariable")
            .await
    }

    /// The AWS integrations the caller can see.
    pub async fn aws_integrations(&self) -> Result<Vec<AwsIntegration>> {
        const Q: &str = concat!("query { awsIntegrations { ", aws_integration_fields!(), " } }");
        self.field(Q, json!({}), "awsIntegrations").await
    }

    pub async fn aws_integration_create(&self, input: &AwsIntegrationInput) -> Result<AwsIntegration> {
        const Q: &str = concat!(
            "mutation($input: AwsIntegrationInput!) { awsIntegrationCreate(input: $input) { ",
            aws_integration_fields!(),
            " } }"
        );
        self.field(Q, json!({ "input": input }), "awsIntegrationCreate").await
    }

    /// Deletes the integration and returns it as it was.
    pub async fn aws_integration_delete(&self, id: &str) -> Result<AwsIntegration> {
        const Q: &str = concat!(
            "mutation($id: String!) { awsIntegrationDelete(id: $id) { ",
            aws_integration_fields!(),
            " } }"
        );
        self.field(Q, json!({ "id": id }), "awsIntegrationDelete").await
    }

    /// Makes the stack's runs use this integration, returning it as it is now.
    pub async fn aws_integration_attach(&self, id: &str, stack_id: &str) -> Result<AwsIntegration> {
        const Q: &str = concat!(
            "mutation($id: String!, $stackId: String!) { awsIntegrationAttach(id: $id, stackId: $stackId) { ",
            aws_integration_fields!(),
            " } }"
        );
        self.field(Q, json!({ "id": id, "stackId": stack_id }), "awsIntegrationAttach")
            .await
    }

    /// Detaches the stack's AWS integration (a stack has at most one), returning the
    /// integration as it is now.
    pub async fn aws_integration_detach(&self, stack_id: &str) -> Result<AwsIntegration> {
        const Q: &str = concat!(
            "mutation($stackId: String!) { awsIntegrationDetach(stackId: $stackId) { ",
            aws_integration_fields!(),
            " } }"
        );
        self.field(Q, json!({ "stackId": stack_id }), "awsIntegrationDetach")
            .await
    }

    /// The stack's drift status with its open drift records, in one request; an unknown
    /// stack is `not_found`.
    pub async fn stack_drift(&self, stack_id: &str) -> Result<StackDrift> {
        const Q: &str = concat!(
            "query($id: ID!) { stack(id: $id) { id driftStatus driftReaction driftCheckedAt } ",
            "driftRecords(stackId: $id, openOnly: true) { ",
            drift_record_fields!(),
            " } }"
        );
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Status {
            id: String,
            drift_status: DriftStatus,
            drift_reaction: DriftReaction,
            drift_checked_at: Option<chrono::DateTime<chrono::Utc>>,
        }
        let mut data = self.graphql(Q, json!({ "id": stack_id })).await?;
        let status: Option<Status> = take_field(&mut data, "stack")?;
        let status = status.ok_or_else(|| ClientError::api("not_found", format!("stack {stack_id} not found")))?;
        Ok(StackDrift {
            stack: status.id,
            drift_status: status.drift_status,
            drift_reaction: status.drift_reaction,
            drift_checked_at: status.drift_checked_at,
            records: take_field(&mut data, "driftRecords")?,
        })
    }

    /// Drift records, newest first: of one stack, or across the organization (the drift
    /// inbox) without `stack_id`; `open_only` leaves out resolved ones.
    pub async fn drift_records(&self, stack_id: Option<&str>, open_only: bool) -> Result<Vec<DriftRecord>> {
        const Q: &str = concat!(
            "query($stackId: ID, $openOnly: Boolean!) { driftRecords(stackId: $stackId, openOnly: $openOnly) { ",
            drift_record_fields!(),
            " } }"
        );
        self.field(Q, json!({ "stackId": stack_id, "openOnly": open_only }), "driftRecords")
            .await
    }

    /// The stack's drift-check schedules.
    pub async fn drift_schedules(&self, stack_id: &str) -> Result<Vec<DriftSchedule>> {
        const Q: &str = concat!(
            "query($stackId: ID!) { driftSchedules(stackId: $stackId) { ",
            drift_schedule_fields!(),
            " } }"
        );
        self.field(Q, json!({ "stackId": stack_id }), "driftSchedules").await
    }

    /// Checks the stack's drift on a schedule: `cron` has 5 fields (6 with seconds) and is
    /// read in `timezone` (`UTC`, `Europe/Berlin`, …). With `reaction`, also sets what the
    /// stack does when a check finds drift (admin).
    pub async fn drift_schedule_add(
        &self,
        stack_id: &str,
        cron: &str,
        timezone: &str,
        reaction: Option<&DriftReaction>,
    ) -> Result<DriftSchedule> {
        const Q: &str = concat!(
            "mutation($stackId: ID!, $cron: String!, $timezone: String!, $reaction: DriftReaction) { ",
            "driftScheduleAdd(stackId: $stackId, cron: $cron, timezone: $timezone, reaction: $reaction) { ",
            drift_schedule_fields!(),
            " } }"
        );
        self.field(
            Q,
            json!({ "stackId": stack_id, "cron": cron, "timezone": timezone, "reaction": reaction }),
            "driftScheduleAdd",
        )
        .await
    }

    /// Deletes a drift-check schedule and returns it as it was.
    pub async fn drift_schedule_delete(&self, id: &str) -> Result<DriftSchedule> {
        const Q: &str = concat!(
            "mutation($id: ID!) { driftScheduleDelete(id: $id) { ",
            drift_schedule_fields!(),
            " } }"
        );
        self.field(Q, json!({ "id": id }), "driftScheduleDelete").await
    }

    /// Queues a drift check now: a proposed, refresh-only run whose `has_changes` says
    /// whether drift was found. Refused with `drift_check_not_possible` (and the reason)
    /// while a tracked run or another check is in progress, or before the stack's first
    /// tracked run finished.
    pub async fn drift_check(&self, stack_id: &str) -> Result<Run> {
        const Q: &str = concat!(
            "mutation($stackId: ID!) { driftCheck(stackId: $stackId) { ",
            run_fields!(),
            " } }"
        );
        self.field(Q, json!({ "stackId": stack_id }), "driftCheck").await
    }

    /// The notification endpoints the caller can see.
    pub async fn notification_endpoints(&self) -> Result<Vec<NotificationEndpoint>> {
        const Q: &str = concat!(
            "query { notificationEndpoints { ",
            notification_endpoint_fields!(),
            " } }"
        );
        self.field(Q, json!({}), "notificationEndpoints").await
    }

    /// Creates a notification endpoint; its secret is never returned (see `has_secret`).
    pub async fn notification_endpoint_create(
        &self,
        input: &NotificationEndpointInput,
    ) -> Result<NotificationEndpoint> {
        const Q: &str = concat!(
            "mutation($input: NotificationEndpointInput!) { notificationEndpointCreate(input: $input) { ",
            notification_endpoint_fields!(),
            " } }"
        );
        self.field(Q, json!({ "input": input }), "notificationEndpointCreate")
            .await
    }

    /// Deletes a notification endpoint and returns it as it was.
    pub async fn notification_endpoint_delete(&self, id: &str) -> Result<NotificationEndpoint> {
        const Q: &str = concat!(
            "mutation($id: ID!) { notificationEndpointDelete(id: $id) { ",
            notification_endpoint_fields!(),
            " } }"
        );
        self.field(Q, json!({ "id": id }), "notificationEndpointDelete").await
    }

    /// The latest notification deliveries, newest first: of one endpoint, or of all of
    /// them. `limit` unset takes the server's default (50).
    pub async fn notification_deliveries(
        &self,
        endpoint: Option<&str>,
        limit: Option<u32>,
    ) -> Result<Vec<NotificationDelivery>> {
        // `limit` is `Int! = 50` in the schema: a nullable variable needs a default of its
        // own to go there, and an unset limit is left out of the variables.
        const Q: &str = concat!(
            "query($endpoint: ID, $limit: Int = 50) { notificationDeliveries(endpoint: $endpoint, limit: $limit) { ",
            notification_delivery_fields!(),
            " } }"
        );
        let mut vars = json!({ "endpoint": endpoint });
        if let Some(l) = limit {
            vars["limit"] = json!(l);
        }
        self.field(Q, vars, "notificationDeliveries").await
    }

    /// The policies the caller can see, without their versions, attachments, evaluations
    /// and samples (see [`Client::policy`]).
    pub async fn policies(&self) -> Result<Vec<Policy>> {
        const Q: &str = concat!("query { policies { ", policy_fields!(), " } }");
        self.field(Q, json!({}), "policies").await
    }

    /// The policy with this id, with its versions, the stacks it is attached to, its latest
    /// evaluations ([`POLICY_EVALUATIONS_LIMIT`]) and its samples; an unknown one is
    /// `not_found`.
    pub async fn policy(&self, id: &str) -> Result<Policy> {
        const Q: &str = concat!(
            "query($id: ID!, $limit: Int!) { policy(id: $id) { ",
            policy_fields!(),
            " versions { version body labels createdBy createdAt } attachedStacks ",
            "evaluations(limit: $limit) { ",
            policy_evaluation_fields!(),
            " } samples { inputHash createdAt } } }"
        );
        self.field(Q, json!({ "id": id, "limit": POLICY_EVALUATIONS_LIMIT }), "policy")
            .await
    }

    /// Creates a policy (admin on its space). Rego that does not compile is refused with
    /// `bad_request` and its position (`policy does not compile: line L, column C: …`).
    pub async fn policy_create(&self, input: &PolicyCreateInput) -> Result<Policy> {
        const Q: &str = concat!(
            "mutation($input: PolicyCreateInput!) { policyCreate(input: $input) { ",
            policy_fields!(),
            " } }"
        );
        self.field(Q, json!({ "input": input }), "policyCreate").await
    }

    /// Changes a policy (admin); a new body or new labels make a new version. Rego that does
    /// not compile is refused as by [`Client::policy_create`].
    pub async fn policy_update(&self, id: &str, input: &PolicyUpdateInput) -> Result<Policy> {
        const Q: &str = concat!(
            "mutation($id: ID!, $input: PolicyUpdateInput!) { policyUpdate(id: $id, input: $input) { ",
            policy_fields!(),
            " } }"
        );
        self.field(Q, json!({ "id": id, "input": input }), "policyUpdate").await
    }

    /// Deletes the policy and returns it as it was.
    pub async fn policy_delete(&self, id: &str) -> Result<Policy> {
        const Q: &str = concat!(
            "mutation($id: ID!) { policyDelete(id: $id) { ",
            policy_fields!(),
            " } }"
        );
        self.field(Q, json!({ "id": id }), "policyDelete").await
    }

    /// Attaches a policy to a stack (admin on the stack). The policy must live in the stack's
    /// space or an ancestor it inherits from; login policies are never attached.
    pub async fn policy_attach(&self, id: &str, stack_id: &str) -> Result<PolicyAttachment> {
        const Q: &str = concat!(
            "mutation($id: ID!, $stackId: ID!) { policyAttach(id: $id, stackId: $stackId) { ",
            policy_attachment_fields!(),
            " } }"
        );
        self.field(Q, json!({ "id": id, "stackId": stack_id }), "policyAttach")
            .await
    }

    /// Detaches a policy from a stack (admin on the stack).
    pub async fn policy_detach(&self, id: &str, stack_id: &str) -> Result<PolicyAttachment> {
        const Q: &str = concat!(
            "mutation($id: ID!, $stackId: ID!) { policyDetach(id: $id, stackId: $stackId) { ",
            policy_attachment_fields!(),
            " } }"
        );
        self.field(Q, json!({ "id": id, "stackId": stack_id }), "policyDetach")
            .await
    }

    /// Replays the input the run gave policies of this policy's type through the policy's
    /// current version; nothing is stored. A run without such an input is `bad_request`.
    pub async fn policy_simulate(&self, id: &str, run_id: &str) -> Result<PolicySimulation> {
        const Q: &str = "query($id: ID!, $runId: ID!) { policySimulate(id: $id, runId: $runId) { \
                         outcome messages result } }";
        self.field(Q, json!({ "id": id, "runId": run_id }), "policySimulate")
            .await
    }

    /// The policy evaluations made for a run, oldest first; an unknown run is `not_found`.
    pub async fn run_policy_evaluations(&self, run_id: &str) -> Result<Vec<PolicyEvaluation>> {
        const Q: &str = concat!(
            "query($id: ID!) { run(id: $id) { policyEvaluations { ",
            policy_evaluation_fields!(),
            " } } }"
        );
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Evaluations {
            policy_evaluations: Vec<PolicyEvaluation>,
        }
        let run: Option<Evaluations> = self.field(Q, json!({ "id": run_id }), "run").await?;
        run.map(|r| r.policy_evaluations)
            .ok_or_else(|| ClientError::api("not_found", format!("run {run_id} not found")))
    }

    /// The raw Terraform state of a stack (the current version, or the one with `serial`);
    /// `None` when the stack has no state yet.
    pub async fn state_pull(&self, org: &str, stack: &str, serial: Option<i64>) -> Result<Option<Vec<u8>>> {
        let mut url = self.url("api/v1")?;
        url.path_segments_mut()
            .map_err(|()| ClientError::InvalidEndpoint {
                endpoint: self.endpoint.to_string(),
                reason: "not a base URL".into(),
            })?
            .extend(["orgs", org, "stacks", stack, "state"]);
        if let Some(s) = serial {
            url.query_pairs_mut().append_pair("serial", &s.to_string());
        }
        self.authenticated(|token| {
            let req = authorize(self.http.get(url.clone()), token.as_deref());
            async move {
                let resp = req.send().await?;
                let status = resp.status();
                let body = resp.bytes().await?;
                match status {
                    StatusCode::NO_CONTENT => Ok(None),
                    s if s.is_success() && body.is_empty() => Ok(None),
                    s if s.is_success() => Ok(Some(body.to_vec())),
                    s => Err(http_error(s, &body)),
                }
            }
        })
        .await
    }
}

/// The top-level field `name` of a GraphQL answer's data, decoded.
fn take_field<T: DeserializeOwned>(data: &mut serde_json::Map<String, Value>, name: &str) -> Result<T> {
    let v = data.remove(name).unwrap_or(Value::Null);
    serde_json::from_value(v).map_err(|e| ClientError::Decode(format!("{name}: {e}")))
}

fn authorize(req: reqwest::RequestBuilder, token: Option<&str>) -> reqwest::RequestBuilder {
    match token {
        Some(t) => req.bearer_auth(t),
        None => req,
    }
}

/// Mutations answering `Boolean!` report failures as errors; `false` would be a server bug.
fn confirmed(done: bool, field: &str) -> Result<()> {
    if done {
        Ok(())
    } else {
        Err(ClientError::Decode(format!("{field} returned false")))
    }
}

fn graphql_errors(errors: Vec<GraphqlError>) -> ClientError {
    let code = errors
        .iter()
        .find_map(|e| e.extensions.as_ref()?.get("code")?.as_str().map(str::to_owned))
        .unwrap_or_else(|| "graphql".to_owned());
    let message = errors.into_iter().map(|e| e.message).collect::<Vec<_>>().join("; ");
    ClientError::Api { code, message }
}

fn http_error(status: StatusCode, body: &[u8]) -> ClientError {
    if let Ok(e) = serde_json::from_slice::<ErrorBody>(body) {
        return ClientError::Api {
            code: e.code,
            message: e.message,
        };
    }
    let text = String::from_utf8_lossy(body)
        .trim()
        .chars()
        .take(500)
        .collect::<String>();
    match status {
        StatusCode::UNAUTHORIZED => ClientError::api(
            "unauthenticated",
            if text.is_empty() {
                "authentication required".to_owned()
            } else {
                text
            },
        ),
        StatusCode::FORBIDDEN => {
            ClientError::api("forbidden", if text.is_empty() { "forbidden".to_owned() } else { text })
        }
        StatusCode::NOT_FOUND => {
            ClientError::api("not_found", if text.is_empty() { "not found".to_owned() } else { text })
        }
        s => ClientError::Http {
            status: s.as_u16(),
            body: text,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_is_normalised_to_a_base() -> Result<()> {
        let c = Client::new("http://localhost:8080", None)?;
        assert_eq!(c.url("graphql")?.as_str(), "http://localhost:8080/graphql");
        let c = Client::new("https://example.com/tp/", Some(String::new()))?;
        assert_eq!(c.url("graphql")?.as_str(), "https://example.com/tp/graphql");
        assert_eq!(c.token(), None);
        assert!(matches!(
            Client::new("localhost:8080", None),
            Err(ClientError::InvalidEndpoint { .. })
        ));
        assert!(matches!(
            Client::new("not a url", None),
            Err(ClientError::InvalidEndpoint { .. })
        ));
        Ok(())
    }

    #[test]
    fn graphql_errors_keep_the_first_code_and_all_messages() {
        let errs: Vec<GraphqlError> = serde_json::from_value(json!([
            {"message": "stack is locked", "extensions": {"code": "stack_locked"}},
            {"message": "second"}
        ]))
        .unwrap_or_default();
        match graphql_errors(errs) {
            ClientError::Api { code, message } => {
                assert_eq!(code, "stack_locked");
                assert_eq!(message, "stack is locked; second");
            }
            e => panic!("unexpected {e:?}"),
        }
    }

    #[test]
    fn http_errors_use_the_rest_body_or_the_status() {
        let e = http_error(
            StatusCode::CONFLICT,
            br#"{"code":"state_serial_conflict","message":"older serial"}"#,
        );
        assert_eq!(e.code(), Some("state_serial_conflict"));
        assert!(http_error(StatusCode::UNAUTHORIZED, b"").is_unauthenticated());
        assert!(matches!(
            http_error(StatusCode::BAD_GATEWAY, b"oops"),
            ClientError::Http { status: 502, .. }
        ));
    }

    #[test]
    fn run_decodes_known_and_unknown_enums() -> Result<(), serde_json::Error> {
        let r: Run = serde_json::from_value(json!({
            "id": "0190f0a0-0000-7000-8000-000000000001", "stackId": "net", "type": "PROPOSED",
            "state": "PENDING_REVIEW", "terminal": false, "commitSha": null, "triggeredBy": "a@b.c",
            "driftDetection": false, "planSummary": {"add": 1, "change": 0, "destroy": 2},
            "hasChanges": true, "error": null, "outputs": null, "runnerId": null,
            "createdAt": "2026-01-01T00:00:00Z", "updatedAt": "2026-01-01T00:00:01Z",
            "events": [
                {"state": "QUEUED", "note": null, "at": "2026-01-01T00:00:00Z"},
                {"state": "REPLANNING", "note": null, "at": "2026-01-01T00:00:00Z"}
            ]
        }))?;
        assert_eq!(r.run_type, RunType::Proposed);
        assert_eq!(r.state, RunState::PendingReview);
        assert_eq!(r.events[0].state, RunState::Queued);
        assert_eq!(r.events[1].state, RunState::Other("REPLANNING".into()));
        assert_eq!(r.plan_summary.map(|p| p.to_string()), Some("+1 ~0 -2".into()));
        let back = serde_json::to_value(&r)?;
        assert_eq!(back["type"], "PROPOSED");
        assert_eq!(back["state"], "PENDING_REVIEW");
        assert_eq!(back["events"][1]["state"], "REPLANNING");
        Ok(())
    }

    #[test]
    fn create_input_omits_unset_fields() -> Result<(), serde_json::Error> {
        let i = StackCreateInput {
            name: "Net".into(),
            repository: "https://git/x".into(),
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_value(&i)?,
            json!({"name": "Net", "repository": "https://git/x"})
        );
        Ok(())
    }

    #[test]
    fn subject_is_the_graphql_input_object() -> Result<(), serde_json::Error> {
        let cases = [
            (
                Subject::User("ada@example.com".into()),
                json!({"user": "ada@example.com"}),
                "user",
            ),
            (Subject::Team("ops".into()), json!({"team": "ops"}), "team"),
            (Subject::ApiKey("k1".into()), json!({"apiKey": "k1"}), "api_key"),
        ];
        for (subject, wire, kind) in cases {
            assert_eq!(serde_json::to_value(&subject)?, wire);
            assert_eq!(serde_json::from_value::<Subject>(wire)?, subject);
            assert_eq!(subject.kind(), kind);
        }
        assert_eq!(Subject::ApiKey("k1".into()).to_string(), "API key k1");
        Ok(())
    }

    #[test]
    fn secrets_stay_out_of_debug_output() -> Result<(), serde_json::Error> {
        let u = UserCreate {
            email: "a@b.c".into(),
            password: Some("hunter2hunter2".into()),
            ..Default::default()
        };
        let d = format!("{u:?}");
        assert!(!d.contains("hunter2") && d.contains("<redacted>"), "{d}");
        let k: ApiKeyCreated = serde_json::from_value(json!({
            "secret": "tpk_s3cr3t",
            "key": {"id": "k1", "name": "ci", "kind": "service", "role": "", "owner": null,
                    "createdAt": "2026-01-01T00:00:00Z", "expiresAt": null, "lastUsedAt": null, "revokedAt": null}
        }))?;
        assert_eq!(k.key.kind, ApiKeyKind::Service);
        let d = format!("{k:?}");
        assert!(!d.contains("s3cr3t"), "{d}");
        Ok(())
    }

    #[test]
    fn api_key_activity_follows_revocation_and_expiry() -> Result<(), Box<dyn std::error::Error>> {
        let key = |expires: Value, revoked: Value| {
            serde_json::from_value::<ApiKey>(json!({
                "id": "k1", "name": "ci", "kind": "robot", "role": "reader", "owner": "ada@example.com",
                "createdAt": "2026-01-01T00:00:00Z", "expiresAt": expires, "lastUsedAt": null, "revokedAt": revoked
            }))
        };
        let now: chrono::DateTime<chrono::Utc> = "2026-02-01T00:00:00Z".parse()?;
        assert!(key(Value::Null, Value::Null)?.is_active(now));
        assert!(key(json!("2026-03-01T00:00:00Z"), Value::Null)?.is_active(now));
        assert!(!key(json!("2026-01-15T00:00:00Z"), Value::Null)?.is_active(now));
        assert!(!key(Value::Null, json!("2026-01-20T00:00:00Z"))?.is_active(now));
        assert_eq!(key(Value::Null, Value::Null)?.kind, ApiKeyKind::Other("robot".into()));
        Ok(())
    }

    #[test]
    fn audit_query_sends_times_as_rfc3339_and_omits_unset_filters() -> Result<(), Box<dyn std::error::Error>> {
        assert_eq!(serde_json::to_value(AuditQuery::default())?, json!({}));
        let q = AuditQuery {
            actor: Some("ada@example.com".into()),
            since: Some("2026-11-30T11:00:00+01:00".parse()?),
            until: Some("2026-11-30T12:00:00.250Z".parse()?),
            limit: Some(5),
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_value(&q)?,
            json!({"actor": "ada@example.com", "since": "2026-11-30T10:00:00Z",
                   "until": "2026-11-30T12:00:00.250Z", "limit": 5})
        );
        Ok(())
    }

    #[test]
    fn create_arguments_omit_unset_fields() -> Result<(), serde_json::Error> {
        let s = SpaceCreate {
            slug: "prod".into(),
            ..Default::default()
        };
        assert_eq!(serde_json::to_value(&s)?, json!({"slug": "prod", "inherit": false}));
        let k = ApiKeyCreate {
            name: "ci".into(),
            kind: Some(ApiKeyKind::Service),
            expires_in_days: Some(30),
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_value(&k)?,
            json!({"name": "ci", "kind": "service", "expiresInDays": 30})
        );
        Ok(())
    }

    #[test]
    fn variable_input_is_the_graphql_input_and_hides_a_secret_from_debug() -> Result<(), serde_json::Error> {
        let mut v = VariableInput {
            name: "TF_VAR_token".into(),
            value: "s3cr3t-value".into(),
            secret: true,
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_value(&v)?,
            json!({"name": "TF_VAR_token", "value": "s3cr3t-value", "kind": "ENV", "secret": true, "applyOnly": false})
        );
        let d = format!("{v:?}");
        assert!(!d.contains("s3cr3t") && d.contains("<redacted>"), "{d}");
        v.secret = false;
        v.kind = VariableKind::File;
        assert!(format!("{v:?}").contains("s3cr3t-value"));
        assert_eq!(serde_json::to_value(&v)?["kind"], "FILE");
        Ok(())
    }

    #[test]
    fn context_decodes_with_secret_values_absent_and_unknown_kinds_kept() -> Result<(), serde_json::Error> {
        let c: Context = serde_json::from_value(json!({
            "id": "aws-prod", "name": "AWS prod", "description": "", "labels": ["autoattach:prod"],
            "space": "root", "createdAt": "2026-01-01T00:00:00Z",
            "variables": [
                {"name": "AWS_REGION", "kind": "ENV", "secret": false, "applyOnly": false,
                 "value": "eu-west-1", "checksum": "ab12", "updatedAt": "2026-01-01T00:00:00Z"},
                {"name": "token", "kind": "TERRAFORM", "secret": true, "applyOnly": true,
                 "value": null, "checksum": "cd34", "updatedAt": "2026-01-01T00:00:00Z"},
                {"name": "x", "kind": "MOUNTED_SECRET", "secret": false, "applyOnly": false,
                 "value": "", "checksum": "ef56", "updatedAt": "2026-01-01T00:00:00Z"}
            ],
            "attachments": [{"context": "aws-prod", "stack": "net", "priority": 0, "autoAttached": true}]
        }))?;
        assert_eq!(c.variables[0].kind, VariableKind::Env);
        assert_eq!(c.variables[1].kind, VariableKind::Terraform);
        assert_eq!(c.variables[1].value, None);
        assert_eq!(c.variables[2].kind, VariableKind::Other("MOUNTED_SECRET".into()));
        assert!(c.attachments[0].auto_attached);
        let back = serde_json::to_value(&c)?;
        assert_eq!(back["variables"][1]["value"], Value::Null);
        assert_eq!(back["variables"][2]["kind"], "MOUNTED_SECRET");
        Ok(())
    }

    #[test]
    fn stack_and_drift_enums_decode_known_and_unknown_names() -> Result<(), serde_json::Error> {
        let s: Stack = serde_json::from_value(json!({
            "id": "net", "name": "Net", "description": "", "repository": "r", "branch": "main",
            "projectRoot": "", "tool": "terraform", "toolVersion": null, "autodeploy": false, "labels": [],
            "workerPool": "default", "lock": null, "driftStatus": "IN_SYNC", "driftReaction": "RECONCILE",
            "driftCheckedAt": "2026-01-01T00:00:00Z",
            "createdAt": "2026-01-01T00:00:00Z", "updatedAt": "2026-01-01T00:00:00Z"
        }))?;
        assert_eq!(s.drift_status, DriftStatus::InSync);
        assert_eq!(s.drift_reaction, DriftReaction::Reconcile);
        assert!(s.drift_checked_at.is_some());
        let back = serde_json::to_value(&s)?;
        assert_eq!(
            (&back["driftStatus"], &back["driftReaction"]),
            (&json!("IN_SYNC"), &json!("RECONCILE"))
        );

        assert_eq!(
            serde_json::from_value::<DriftStatus>(json!("DRIFTED"))?,
            DriftStatus::Drifted
        );
        let later: DriftStatus = serde_json::from_value(json!("CHECKING"))?;
        assert_eq!(later, DriftStatus::Other("CHECKING".into()));
        assert_eq!(later.to_string(), "CHECKING");
        assert_eq!(serde_json::to_value(&later)?, json!("CHECKING"));
        assert_eq!(
            serde_json::from_value::<NotificationEvent>(json!("POLICY_DENIED"))?,
            NotificationEvent::PolicyDenied
        );
        assert_eq!(
            serde_json::from_value::<NotificationKind>(json!("EMAIL"))?,
            NotificationKind::Other("EMAIL".into())
        );
        assert_eq!(NotificationKind::Pagerduty.as_str(), "PAGERDUTY");
        Ok(())
    }

    #[test]
    fn notification_input_omits_unset_fields_and_hides_the_secret_from_debug() -> Result<(), serde_json::Error> {
        let mut i = NotificationEndpointInput {
            name: "ops".into(),
            url: "https://example.com/hook".into(),
            events: vec![NotificationEvent::DriftDetected],
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_value(&i)?,
            json!({"name": "ops", "kind": "WEBHOOK", "url": "https://example.com/hook", "events": ["DRIFT_DETECTED"]})
        );
        i.secret = Some("hmac-s3cr3t".into());
        i.stack_labels = Some(vec!["prod".into()]);
        i.kind = NotificationKind::Pagerduty;
        let v = serde_json::to_value(&i)?;
        assert_eq!(
            (&v["secret"], &v["stackLabels"], &v["kind"]),
            (&json!("hmac-s3cr3t"), &json!(["prod"]), &json!("PAGERDUTY"))
        );
        let d = format!("{i:?}");
        assert!(!d.contains("s3cr3t") && d.contains("<redacted>"), "{d}");
        Ok(())
    }

    #[test]
    fn context_and_aws_inputs_omit_unset_fields() -> Result<(), serde_json::Error> {
        let c = ContextCreateInput {
            name: "AWS prod".into(),
            ..Default::default()
        };
        assert_eq!(serde_json::to_value(&c)?, json!({"name": "AWS prod"}));
        let a = AwsIntegrationInput {
            name: "prod".into(),
            role_arn: "arn:aws:iam::123456789012:role/tp".into(),
            duration_seconds: Some(900),
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_value(&a)?,
            json!({"name": "prod", "roleArn": "arn:aws:iam::123456789012:role/tp", "durationSeconds": 900})
        );
        Ok(())
    }
    #[test]
    fn policy_inputs_omit_unset_fields_and_types_keep_unknown_names() -> Result<(), serde_json::Error> {
        let c = PolicyCreateInput {
            name: "Deny big".into(),
            body: "package spacelift".into(),
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_value(&c)?,
            json!({"name": "Deny big", "type": "PLAN", "body": "package spacelift"})
        );
        let u = PolicyUpdateInput {
            labels: Some(vec![]),
            ..Default::default()
        };
        assert!(!u.is_empty() && PolicyUpdateInput::default().is_empty());
        // An empty set clears the labels: it is sent, not left out.
        assert_eq!(serde_json::to_value(&u)?, json!({"labels": []}));
        assert_eq!(serde_json::from_value::<PolicyType>(json!("LOGIN"))?, PolicyType::Login);
        assert_eq!(
            serde_json::from_value::<PolicyType>(json!("ACCESS"))?,
            PolicyType::Other("ACCESS".into())
        );
        Ok(())
    }

    #[test]
    fn policy_details_are_left_out_of_json_when_not_read() -> Result<(), serde_json::Error> {
        let p: Policy = serde_json::from_value(json!({
            "id": "deny-big", "name": "Deny big", "type": "PLAN", "description": "", "labels": [],
            "body": "package spacelift", "version": 1, "space": "root",
            "createdAt": "2026-01-01T00:00:00Z", "updatedAt": "2026-01-01T00:00:00Z"
        }))?;
        assert_eq!(p.versions, None);
        let back = serde_json::to_value(&p)?;
        assert!(
            back.get("versions").is_none() && back.get("evaluations").is_none(),
            "{back}"
        );
        assert_eq!(back["type"], "PLAN");
        Ok(())
    }
}
