//! Single sign-on: the OpenID Connect authorization code flow with PKCE (`flow`), ID token
//! verification (`oidc`) and what a verified login does (`provision`).

pub mod flow;
pub mod oidc;
pub mod provision;
