//! terraplane-cli
