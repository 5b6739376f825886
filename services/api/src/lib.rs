//! The api service: owns the database; serves GraphQL (`/graphql`, `/graphql/ws`), the
//! Terraform state backend, the runner protocol, health checks and the web placeholder.
//! [`Application::build`] binds its listener first and exposes the port, so tests use port 0.

pub mod auth;
pub mod bootstrap;
pub mod bus;
pub mod drift;
pub mod error;
pub mod graphql;
pub mod graphql_drift;
pub mod graphql_notify;
pub mod graphql_policy;
pub mod graphql_vars;
pub mod identity;
pub mod limiter;
pub mod notify;
pub mod policy;
pub mod runner_api;
pub mod service;
pub mod sso;
pub mod state_backend;
pub mod vars;

use std::net::TcpListener;
use std::sync::Arc;

use actix_web::dev::Server;
use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use async_graphql::http::GraphiQLSource;
use async_graphql_actix_web::{GraphQLRequest, GraphQLResponse, GraphQLSubscription};
use terraplane_config::Config;
use terraplane_domain::Clock;
use terraplane_queue::JobQueue;
use terraplane_scheduler::Scheduler;
use terraplane_store::Store;

use crate::auth::{Auth, Principal};
use crate::bus::Bus;
use crate::error::{ApiError, ApiResult};
use crate::graphql::{ApiSchema, AuthFailure};

/// A valid argon2id hash of a random string, verified against when the email is unknown
/// so that login takes the same time either way.
pub const DUMMY_HASH: &str =
    "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$Yt3Vd1J0m2J9p0Z8CwS9F8oQ4k0pS2rW1G8m4gC1c0o";

pub struct AppState {
    pub store: Store,
    pub queue: Arc<dyn JobQueue>,
    pub clock: Arc<dyn Clock>,
    pub cfg: Arc<Config>,
    pub auth: Auth,
    pub bus: Bus,
    pub public_url: String,
    /// Publishes runs as soon as they become ready, without waiting for the scheduler's
    /// next tick (the scheduler would do it too; claims dedupe).
    pub dispatcher: Scheduler,
    pub logins: limiter::LoginLimiter,
    pub issuer: identity::Issuer,
}

impl AppState {
    pub async fn principal(&self, req: &HttpRequest) -> ApiResult<Principal> {
        let token = auth::credential(req).ok_or_else(|| ApiError::Unauthenticated("missing credentials".into()))?;
        let mut p = self.auth.authenticate(&self.store, &token, self.clock.now()).await?;
        p.meta = auth::RequestMeta::of(req);
        Ok(p)
    }

    pub fn kick_scheduler(&self) {
        let d = self.dispatcher.clone();
        tokio::spawn(async move {
            if let Err(e) = d.tick().await {
                tracing::warn!(error = %e, "immediate dispatch failed; the scheduler will retry");
            }
        });
    }
}

/// A running api: its port, its state (tests reach the store through it) and its task.
pub struct ApiHandle {
    pub port: u16,
    pub state: Arc<AppState>,
    pub task: tokio::task::JoinHandle<std::io::Result<()>>,
}

/// Builds the api on an already bound listener and starts serving.
pub async fn start(
    cfg: Arc<Config>,
    store: Store,
    queue: Arc<dyn JobQueue>,
    clock: Arc<dyn Clock>,
    listener: TcpListener,
    shutdown: tokio_util::sync::CancellationToken,
) -> anyhow::Result<ApiHandle> {
    let jwt = cfg
        .auth
        .jwt_secret
        .as_ref()
        .ok_or_else(|| anyhow::anyhow!("auth.jwt_secret (TERRAPLANE_AUTH__JWT_SECRET) must be set"))?;
    let auth = Auth::new(
        jwt.expose().as_bytes(),
        cfg.auth.session_ttl_secs,
        cfg.auth.run_token_ttl_secs,
        cfg.runner.pool_token.as_ref().map(|s| s.expose().to_owned()),
    );
    let public_url = match &cfg.api.public_url {
        Some(u) => u.trim_end_matches('/').to_owned(),
        None => format!("http://{}", listener.local_addr()?),
    };
    let dispatcher = Scheduler::new(store.clone(), queue.clone(), clock.clone(), cfg.scheduler.clone())
        .with_public_url(public_url.clone())
        .with_policy_config(cfg.policy.clone());
    let state = Arc::new(AppState {
        store,
        queue,
        clock,
        cfg,
        auth,
        bus: Bus::default(),
        public_url,
        dispatcher,
        logins: limiter::LoginLimiter::default(),
        issuer: identity::Issuer::default(),
    });
    let app = Application::build(state.clone(), listener)?;
    let port = app.port();
    let task = tokio::spawn(app.run_until_stopped(shutdown));
    Ok(ApiHandle { port, state, task })
}

/// Connects with the master keys from configuration, refusing to start without a master
/// key or with one that cannot open the stored data keys (never a silent fallback to
/// plaintext or to unreadable secrets).
pub async fn open_store(cfg: &Config) -> anyhow::Result<Store> {
    use terraplane_store::crypto::KeyBytes;
    let master = cfg.secrets.master_key_bytes()?.ok_or_else(|| {
        anyhow::anyhow!("secrets.master_key (TERRAPLANE_SECRETS__MASTER_KEY, 64 hex characters) must be set")
    })?;
    let previous = cfg
        .secrets
        .previous_key_bytes()?
        .iter()
        .filter_map(|k| KeyBytes::from_slice(k))
        .collect();
    let store = Store::open(&cfg.database).await?.with_master_keys(
        KeyBytes::from_slice(&master).ok_or_else(|| anyhow::anyhow!("bad master key"))?,
        previous,
    );
    store.check_master_key().await.map_err(|e| {
        anyhow::anyhow!("secrets.master_key cannot open the stored encryption keys ({e}); refusing to start. Configure the key the data was written with (or list it in secrets.previous_master_keys during a rotation)")
    })?;
    Ok(store)
}

/// `terraplane api`: connects, seeds, listens on `api.listen` until `shutdown`.
pub async fn serve(cfg: Arc<Config>, shutdown: tokio_util::sync::CancellationToken) -> anyhow::Result<()> {
    let queue = terraplane_queue::open(&cfg.queue, None).await?;
    let store = open_store(&cfg).await?;
    bootstrap::seed(&store, &cfg, chrono::Utc::now()).await?;
    let listener =
        TcpListener::bind(&cfg.api.listen).map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", cfg.api.listen))?;
    let api = start(
        cfg.clone(),
        store,
        queue,
        Arc::new(terraplane_domain::SystemClock),
        listener,
        shutdown,
    )
    .await?;
    tracing::info!(port = api.port, "api listening");
    api.task.await??;
    Ok(())
}

/// Every REST route (method, path pattern) the api serves besides GraphQL, health and the
/// web page, taken from the same lists the modules register their routes from, so the
/// tenant-isolation test covers routes added later without being told.
pub fn rest_routes() -> Vec<(&'static str, String)> {
    let mut out: Vec<(&'static str, String)> = state_backend::METHODS
        .iter()
        .map(|m| (*m, state_backend::PATH.to_owned()))
        .collect();
    out.extend(
        runner_api::ROUTES
            .iter()
            .map(|(m, p)| (*m, format!("{}{p}", runner_api::PREFIX))),
    );
    out.extend(sso::flow::ROUTES.iter().map(|(m, p)| (*m, (*p).to_owned())));
    out.extend(sso::github::ROUTES.iter().map(|(m, p)| (*m, (*p).to_owned())));
    out.extend(identity::ROUTES.iter().map(|(m, p)| (*m, (*p).to_owned())));
    out
}

pub struct Application {
    port: u16,
    server: Server,
    pub state: Arc<AppState>,
}

impl Application {
    pub fn build(state: Arc<AppState>, listener: TcpListener) -> anyhow::Result<Application> {
        let port = listener.local_addr()?.port();
        let schema = graphql::build_schema(state.clone());
        let data = web::Data::new(state.clone());
        let max_state = state.cfg.api.max_state_bytes;
        let max_plan = state.cfg.api.max_plan_bytes;
        let server = HttpServer::new(move || {
            App::new()
                .app_data(data.clone())
                .app_data(web::Data::new(schema.clone()))
                .route("/healthz", web::get().to(healthz))
                .route("/readyz", web::get().to(readyz))
                .route("/graphql", web::post().to(graphql_handler))
                .route("/graphql", web::get().to(graphiql))
                .route("/graphql/ws", web::get().to(graphql_ws))
                .configure(|c| state_backend::config(c, max_state))
                .configure(|c| runner_api::config(c, max_plan))
                .configure(sso::flow::config)
                .configure(sso::github::config)
                .configure(identity::config)
                .route("/", web::get().to(index))
        })
        .disable_signals()
        .shutdown_timeout(10)
        .listen(listener)?
        .run();
        Ok(Application { port, server, state })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub async fn run_until_stopped(self, shutdown: tokio_util::sync::CancellationToken) -> std::io::Result<()> {
        let handle = self.server.handle();
        tokio::spawn(async move {
            shutdown.cancelled().await;
            handle.stop(true).await;
        });
        self.server.await
    }
}

async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(serde_json::json!({ "status": "ok" }))
}

async fn readyz(st: web::Data<service::Shared>) -> HttpResponse {
    let db = st.store.ping().await;
    let queue = st.queue.ping().await;
    let body = serde_json::json!({
        "database": db.as_ref().map(|_| "ok".to_owned()).unwrap_or_else(|e| e.to_string()),
        "queue": queue.as_ref().map(|_| "ok".to_owned()).unwrap_or_else(|e| e.to_string()),
    });
    if db.is_ok() && queue.is_ok() {
        HttpResponse::Ok().json(body)
    } else {
        HttpResponse::ServiceUnavailable().json(body)
    }
}

async fn graphql_handler(
    st: web::Data<service::Shared>,
    schema: web::Data<ApiSchema>,
    req: HttpRequest,
    gql: GraphQLRequest,
) -> GraphQLResponse {
    let mut request = gql.into_inner().data(auth::RequestMeta::of(&req));
    if auth::credential(&req).is_some() {
        match st.principal(&req).await {
            Ok(p) => request = request.data(p),
            Err(e) => request = request.data(Some(AuthFailure(e.public_message()))),
        }
    }
    schema.execute(request).await.into()
}

async fn graphql_ws(
    st: web::Data<service::Shared>,
    schema: web::Data<ApiSchema>,
    req: HttpRequest,
    payload: web::Payload,
) -> actix_web::Result<HttpResponse> {
    let st = st.get_ref().clone();
    let header_principal = match auth::credential(&req) {
        Some(_) => st.principal(&req).await.ok(),
        None => None,
    };
    GraphQLSubscription::new(schema.get_ref().clone())
        .on_connection_init(move |value| {
            let st = st.clone();
            let header_principal = header_principal.clone();
            async move {
                let mut data = async_graphql::Data::default();
                let token = value
                    .get("token")
                    .or_else(|| value.get("Authorization"))
                    .and_then(|t| t.as_str())
                    .map(|t| t.trim_start_matches("Bearer ").to_owned());
                let p = match token {
                    Some(t) => Some(
                        st.auth
                            .authenticate(&st.store, &t, st.clock.now())
                            .await
                            .map_err(|e| async_graphql::Error::new(e.public_message()))?,
                    ),
                    None => header_principal,
                };
                if let Some(p) = p {
                    data.insert(p);
                }
                Ok(data)
            }
        })
        .start(&req, payload)
}

async fn graphiql() -> HttpResponse {
    HttpResponse::Ok().content_type("text/html; charset=utf-8").body(
        GraphiQLSource::build()
            .endpoint("/graphql")
            .subscription_endpoint("/graphql/ws")
            .finish(),
    )
}

async fn index() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .body(include_str!("../../../web/index.html"))
}
