//! terraplane-runner
