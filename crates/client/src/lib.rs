//! terraplane-client
