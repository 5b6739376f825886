//! Job dispatch. [`JobQueue`] is what the scheduler publishes to and runners consume from;
//! [`rabbit::RabbitQueue`] is the production implementation (RabbitMQ through lapin) and
//! [`memory::MemoryQueue`] the in-process one used by `terraplane dev`. Messages carry ids
//! only (see `terraplane_protocol::JobMessage`); delivery is at-least-once and runners
//! dedupe by claiming the run through the api.

pub mod memory;
pub mod rabbit;

use async_trait::async_trait;
use terraplane_protocol::JobMessage;

#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error("queue broker error: {0}")]
    Broker(String),
    #[error("the broker did not confirm the message")]
    NotConfirmed,
    #[error("queue closed")]
    Closed,
}

impl From<lapin::Error> for QueueError {
    fn from(e: lapin::Error) -> Self {
        QueueError::Broker(e.to_string())
    }
}

/// The configured queue. `memory` is shared by the components of one process only, so it
/// needs the process's [`memory::MemoryQueue`].
pub async fn open(
    cfg: &terraplane_config::QueueConfig,
    memory: Option<&memory::MemoryQueue>,
) -> Result<std::sync::Arc<dyn JobQueue>, QueueError> {
    if cfg.url == "memory" {
        return match memory {
            Some(m) => Ok(std::sync::Arc::new(m.clone())),
            None => Err(QueueError::Broker(
                "queue.url = memory works only inside `terraplane dev`; set AMQP_URL".into(),
            )),
        };
    }
    Ok(std::sync::Arc::new(
        rabbit::RabbitQueue::connect(&cfg.url, &cfg.prefix).await?,
    ))
}

#[async_trait]
pub trait JobQueue: Send + Sync + 'static {
    /// Publishes a job to a worker pool's queue; returns once the broker has it durably.
    async fn publish(&self, pool: &str, msg: &JobMessage) -> Result<(), QueueError>;
    /// Starts consuming a worker pool's queue, one unacknowledged delivery at a time.
    async fn consume(&self, pool: &str, consumer_tag: &str) -> Result<Box<dyn JobConsumer>, QueueError>;
    /// Whether the broker is reachable (for `/readyz`).
    async fn ping(&self) -> Result<(), QueueError>;
}

#[async_trait]
pub trait JobConsumer: Send {
    /// The next delivery, or `None` when the queue is closed.
    async fn next(&mut self) -> Option<Result<Delivery, QueueError>>;
}

/// A received message. Its body is parsed here: an unparsable one is `Err` with the reason,
/// and the consumer should `reject` it so it goes to the dead-letter queue.
pub struct Delivery {
    pub message: Result<JobMessage, String>,
    acker: Box<dyn Acker>,
}

#[async_trait]
pub(crate) trait Acker: Send + Sync {
    async fn ack(&self) -> Result<(), QueueError>;
    async fn reject(&self) -> Result<(), QueueError>;
}

impl Delivery {
    pub(crate) fn new(body: &[u8], acker: Box<dyn Acker>) -> Self {
        let message = serde_json::from_slice::<JobMessage>(body)
            .map_err(|e| e.to_string())
            .and_then(|m| {
                if m.v == JobMessage::VERSION {
                    Ok(m)
                } else {
                    Err(format!("unsupported message version {}", m.v))
                }
            });
        Self { message, acker }
    }

    /// Acknowledge: the job is taken care of (claimed, or known to need nothing).
    pub async fn ack(self) -> Result<(), QueueError> {
        self.acker.ack().await
    }

    /// Dead-letter the message (never requeued: a poison message would loop hot).
    pub async fn reject(self) -> Result<(), QueueError> {
        self.acker.reject().await
    }
}
