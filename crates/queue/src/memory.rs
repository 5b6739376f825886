//! In-process queue for the single-binary mode: one unbounded channel per worker pool,
//! shared by that pool's consumers. Nothing survives a restart, which is fine because the
//! scheduler re-publishes QUEUED runs that no runner claimed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use terraplane_protocol::JobMessage;
use tokio::sync::mpsc;

use crate::{Acker, Delivery, JobConsumer, JobQueue, QueueError};

type Channel = (
    mpsc::UnboundedSender<Vec<u8>>,
    Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<Vec<u8>>>>,
);

#[derive(Clone, Default)]
pub struct MemoryQueue {
    pools: Arc<Mutex<HashMap<String, Channel>>>,
    dead: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl MemoryQueue {
    pub fn new() -> Self {
        Self::default()
    }

    fn channel(&self, pool: &str) -> Result<Channel, QueueError> {
        let mut pools = self.pools.lock().map_err(|_| QueueError::Closed)?;
        let ch = pools.entry(pool.to_owned()).or_insert_with(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            (tx, Arc::new(tokio::sync::Mutex::new(rx)))
        });
        Ok(ch.clone())
    }

    /// Publishes raw bytes (tests use it to send poison messages).
    pub fn publish_raw(&self, pool: &str, body: Vec<u8>) -> Result<(), QueueError> {
        self.channel(pool)?.0.send(body).map_err(|_| QueueError::Closed)
    }

    /// Messages that consumers rejected.
    pub fn dead_letters(&self) -> Vec<Vec<u8>> {
        self.dead.lock().map(|d| d.clone()).unwrap_or_default()
    }
}

#[async_trait]
impl JobQueue for MemoryQueue {
    async fn publish(&self, pool: &str, msg: &JobMessage) -> Result<(), QueueError> {
        let body = serde_json::to_vec(msg).map_err(|e| QueueError::Broker(e.to_string()))?;
        self.publish_raw(pool, body)
    }

    async fn consume(&self, pool: &str, _tag: &str) -> Result<Box<dyn JobConsumer>, QueueError> {
        Ok(Box::new(MemoryConsumer {
            rx: self.channel(pool)?.1,
            dead: self.dead.clone(),
        }))
    }

    async fn ping(&self) -> Result<(), QueueError> {
        Ok(())
    }
}

struct MemoryConsumer {
    rx: Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<Vec<u8>>>>,
    dead: Arc<Mutex<Vec<Vec<u8>>>>,
}

#[async_trait]
impl JobConsumer for MemoryConsumer {
    async fn next(&mut self) -> Option<Result<Delivery, QueueError>> {
        let body = self.rx.lock().await.recv().await?;
        let acker = MemoryAcker {
            body: body.clone(),
            dead: self.dead.clone(),
        };
        Some(Ok(Delivery::new(&body, Box::new(acker))))
    }
}

struct MemoryAcker {
    body: Vec<u8>,
    dead: Arc<Mutex<Vec<Vec<u8>>>>,
}

#[async_trait]
impl Acker for MemoryAcker {
    async fn ack(&self) -> Result<(), QueueError> {
        Ok(())
    }
    async fn reject(&self) -> Result<(), QueueError> {
        self.dead
            .lock()
            .map_err(|_| QueueError::Closed)?
            .push(self.body.clone());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use terraplane_domain::{RunId, RunPhase};

    #[tokio::test]
    async fn delivers_in_order_and_dead_letters_poison() -> Result<(), QueueError> {
        let q = MemoryQueue::new();
        let a = JobMessage::new(RunId::new(), RunPhase::Plan);
        let b = JobMessage::new(RunId::new(), RunPhase::Apply);
        q.publish("p", &a).await?;
        q.publish_raw("p", b"not json".to_vec())?;
        q.publish("p", &b).await?;
        let mut c = q.consume("p", "t").await?;
        let d1 = c.next().await.ok_or(QueueError::Closed)??;
        assert_eq!(d1.message.as_ref().ok(), Some(&a));
        d1.ack().await?;
        let d2 = c.next().await.ok_or(QueueError::Closed)??;
        assert!(d2.message.is_err());
        d2.reject().await?;
        let d3 = c.next().await.ok_or(QueueError::Closed)??;
        assert_eq!(d3.message.as_ref().ok(), Some(&b));
        assert_eq!(q.dead_letters(), vec![b"not json".to_vec()]);
        Ok(())
    }
}
