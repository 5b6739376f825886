//! In-process change notifications: wakes GraphQL subscriptions as soon as a run changes
//! or gets log lines here. Followers also poll the database, so changes made by another
//! api replica still arrive, just later.

use terraplane_domain::RunId;
use tokio::sync::broadcast;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BusEvent {
    RunChanged(RunId),
    LogAppended(RunId),
}

impl BusEvent {
    pub fn run_id(self) -> RunId {
        match self {
            BusEvent::RunChanged(r) | BusEvent::LogAppended(r) => r,
        }
    }
}

#[derive(Clone)]
pub struct Bus(broadcast::Sender<BusEvent>);

impl Default for Bus {
    fn default() -> Self {
        Self(broadcast::channel(1024).0)
    }
}

impl Bus {
    pub fn publish(&self, e: BusEvent) {
        let _ = self.0.send(e);
    }

    pub fn subscribe(&self) -> broadcast::Receiver<BusEvent> {
        self.0.subscribe()
    }
}
