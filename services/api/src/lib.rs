//! terraplane-api
