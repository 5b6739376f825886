//! One error type for the api, mapped once to an HTTP status and a stable snake_case code
//! (REST body `{code, message}`, GraphQL `extensions.code`). 5xx bodies are opaque; the
//! cause goes to the log.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use terraplane_protocol::ErrorBody;
use terraplane_store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Unauthenticated(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0} not found")]
    NotFound(&'static str),
    #[error("{message}")]
    Conflict { code: &'static str, message: String },
    #[error("{0}")]
    TooLarge(String),
    #[error("{0}")]
    Unavailable(String),
    #[error("too many failed attempts; try again in {0} s")]
    TooManyAttempts(i64),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl ApiError {
    pub fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        ApiError::Conflict {
            code,
            message: message.into(),
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            ApiError::BadRequest(_) => "bad_request",
            ApiError::Unauthenticated(_) => "unauthenticated",
            ApiError::Forbidden(_) => "forbidden",
            ApiError::NotFound(_) => "not_found",
            ApiError::Conflict { code, .. } => code,
            ApiError::TooLarge(_) => "payload_too_large",
            ApiError::Unavailable(_) => "unavailable",
            ApiError::TooManyAttempts(_) => "rate_limited",
            ApiError::Internal(_) => "internal",
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthenticated(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Conflict { .. } => StatusCode::CONFLICT,
            ApiError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::TooManyAttempts(_) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The message a client may see.
    pub fn public_message(&self) -> String {
        match self {
            ApiError::Internal(e) => {
                tracing::error!(error = ?e, "internal error");
                "internal error".into()
            }
            e => e.to_string(),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound(what) => ApiError::NotFound(what),
            StoreError::Conflict(m) => ApiError::conflict("conflict", m),
            StoreError::Invalid(m) => ApiError::Internal(anyhow::anyhow!(m)),
            StoreError::Db(e) => ApiError::Internal(e.into()),
        }
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.status()
    }

    fn error_response(&self) -> HttpResponse {
        let mut b = HttpResponse::build(self.status());
        if matches!(self, ApiError::Unauthenticated(_)) {
            b.insert_header(("WWW-Authenticate", "Basic realm=\"terraplane\""));
        }
        b.json(ErrorBody {
            code: self.code().into(),
            message: self.public_message(),
        })
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
