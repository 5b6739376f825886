//! Single sign-on. `oidc` verifies OpenID Connect ID tokens against the provider's JWKS;
//! the authorization-code flow (PKCE, state, nonce) and user provisioning build on it.

pub mod oidc;
