//! terraplane-queue
