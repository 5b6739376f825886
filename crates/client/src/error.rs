//! The client's one error type: an API refusal keeps the server's stable `code`, so callers
//! branch on `code()` instead of parsing messages.

/// Everything a call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server refused the request: GraphQL `errors[].extensions.code` or a REST
    /// `{code, message}` body (401 without a body is `unauthenticated`).
    #[error("{message}")]
    Api { code: String, message: String },
    /// A non-success HTTP status whose body wasn't an API error.
    #[error("HTTP {status}: {body}")]
    Http { status: u16, body: String },
    /// The request never got an answer: DNS, connect, TLS, timeout.
    #[error("request failed: {0}")]
    Transport(#[source] reqwest::Error),
    /// An answer that doesn't have the expected shape.
    #[error("unexpected response: {0}")]
    Decode(String),
    /// The access token expired and renewing the session with its refresh token failed
    /// (`source`): only a new login helps.
    #[error("the session expired and could not be renewed")]
    SessionRenewal {
        #[source]
        source: Box<ClientError>,
    },
    /// The session was renewed but the hook given to [`crate::Client::with_session`] could
    /// not keep the new tokens.
    #[error("the session was renewed but the new tokens could not be saved: {0}")]
    SessionSave(String),
    /// The endpoint isn't a usable base URL.
    #[error("invalid endpoint {endpoint:?}: {reason}")]
    InvalidEndpoint { endpoint: String, reason: String },
}

impl ClientError {
    /// The server's error code (`not_found`, `stack_locked`, …) when the server refused.
    pub fn code(&self) -> Option<&str> {
        match self {
            ClientError::Api { code, .. } => Some(code),
            _ => None,
        }
    }

    pub fn is_not_found(&self) -> bool {
        self.code() == Some("not_found")
    }

    pub fn is_unauthenticated(&self) -> bool {
        self.code() == Some("unauthenticated")
    }

    /// An access token refused for having expired (`unauthenticated`, "token expired"):
    /// what a session refresh cures.
    pub fn is_token_expired(&self) -> bool {
        match self {
            ClientError::Api { code, message } => {
                code == "unauthenticated" && message.to_ascii_lowercase().contains("expired")
            }
            _ => false,
        }
    }

    pub(crate) fn api(code: impl Into<String>, message: impl Into<String>) -> Self {
        ClientError::Api {
            code: code.into(),
            message: message.into(),
        }
    }
}

impl From<reqwest::Error> for ClientError {
    fn from(e: reqwest::Error) -> Self {
        if e.is_decode() {
            ClientError::Decode(e.to_string())
        } else {
            ClientError::Transport(e)
        }
    }
}
