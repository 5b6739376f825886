//! Single sign-on: the OpenID Connect authorization code flow with PKCE (`flow`), GitHub
//! OAuth (`github`), ID token
//! verification (`oidc`) and what a verified login does (`provision`).

pub mod flow;
pub mod github;
pub mod oidc;
pub mod provision;
