//! terraplane-scheduler
