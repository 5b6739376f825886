//! RabbitMQ through lapin. Topology, declared idempotently on connect and per pool:
//! a durable queue `<prefix>.runs.<pool>` per worker pool whose rejected messages go to the
//! fanout dead-letter exchange `<prefix>.runs.dlx`, bound to the durable queue of the same
//! name. Messages are persistent and every publish waits for the broker's confirm
//! (without `confirm_select`, lapin reports success for messages the broker never took).

use std::collections::HashSet;
use std::sync::Mutex;

use async_trait::async_trait;
use futures::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicNackOptions, BasicPublishOptions, BasicQosOptions, ConfirmSelectOptions,
    ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, ExchangeKind};
use terraplane_protocol::JobMessage;

use crate::{Acker, Delivery, JobConsumer, JobQueue, QueueError};

pub struct RabbitQueue {
    conn: Connection,
    publisher: Channel,
    prefix: String,
    declared: Mutex<HashSet<String>>,
}

impl RabbitQueue {
    pub async fn connect(url: &str, prefix: &str) -> Result<Self, QueueError> {
        let conn = Connection::connect(url, ConnectionProperties::default()).await?;
        let publisher = conn.create_channel().await?;
        publisher.confirm_select(ConfirmSelectOptions::default()).await?;
        let q = Self {
            conn,
            publisher,
            prefix: prefix.to_owned(),
            declared: Mutex::new(HashSet::new()),
        };
        let dlx = q.dlx_name();
        let durable = ExchangeDeclareOptions {
            durable: true,
            ..Default::default()
        };
        q.publisher
            .exchange_declare(&dlx, ExchangeKind::Fanout, durable, FieldTable::default())
            .await?;
        let qopts = QueueDeclareOptions {
            durable: true,
            ..Default::default()
        };
        q.publisher.queue_declare(&dlx, qopts, FieldTable::default()).await?;
        q.publisher
            .queue_bind(&dlx, &dlx, "", QueueBindOptions::default(), FieldTable::default())
            .await?;
        Ok(q)
    }

    pub fn queue_name(&self, pool: &str) -> String {
        format!("{}.runs.{pool}", self.prefix)
    }

    pub fn dlx_name(&self) -> String {
        format!("{}.runs.dlx", self.prefix)
    }

    async fn declare_pool(&self, channel: &Channel, pool: &str) -> Result<String, QueueError> {
        let name = self.queue_name(pool);
        if self.declared.lock().map(|d| d.contains(&name)).unwrap_or(false) {
            return Ok(name);
        }
        let mut args = FieldTable::default();
        args.insert(
            "x-dead-letter-exchange".into(),
            AMQPValue::LongString(self.dlx_name().into()),
        );
        let opts = QueueDeclareOptions {
            durable: true,
            ..Default::default()
        };
        channel.queue_declare(&name, opts, args).await?;
        if let Ok(mut d) = self.declared.lock() {
            d.insert(name.clone());
        }
        Ok(name)
    }

    /// Publishes raw bytes with the same guarantees as [`JobQueue::publish`] (tests use it
    /// for poison messages; benchmarks for the raw round trip).
    pub async fn publish_raw(&self, pool: &str, body: &[u8]) -> Result<(), QueueError> {
        let name = self.declare_pool(&self.publisher, pool).await?;
        let props = BasicProperties::default()
            .with_delivery_mode(2)
            .with_content_type("application/json".into());
        let confirm = self
            .publisher
            .basic_publish(
                "",
                &name,
                BasicPublishOptions {
                    mandatory: true,
                    ..Default::default()
                },
                body,
                props,
            )
            .await?
            .await?;
        if confirm.is_ack() {
            Ok(())
        } else {
            Err(QueueError::NotConfirmed)
        }
    }

    /// Deletes this prefix's queues and exchange (tests clean up after themselves).
    pub async fn delete_topology(&self, pools: &[&str]) -> Result<(), QueueError> {
        for p in pools {
            self.publisher
                .queue_delete(&self.queue_name(p), Default::default())
                .await?;
        }
        self.publisher
            .queue_delete(&self.dlx_name(), Default::default())
            .await?;
        self.publisher
            .exchange_delete(&self.dlx_name(), Default::default())
            .await?;
        Ok(())
    }

    /// Number of messages waiting in the dead-letter queue.
    pub async fn dead_letter_count(&self) -> Result<u32, QueueError> {
        let opts = QueueDeclareOptions {
            durable: true,
            passive: true,
            ..Default::default()
        };
        let q = self
            .publisher
            .queue_declare(&self.dlx_name(), opts, FieldTable::default())
            .await?;
        Ok(q.message_count())
    }
}

#[async_trait]
impl JobQueue for RabbitQueue {
    async fn publish(&self, pool: &str, msg: &JobMessage) -> Result<(), QueueError> {
        let body = serde_json::to_vec(msg).map_err(|e| QueueError::Broker(e.to_string()))?;
        self.publish_raw(pool, &body).await
    }

    async fn consume(&self, pool: &str, tag: &str) -> Result<Box<dyn JobConsumer>, QueueError> {
        let channel = self.conn.create_channel().await?;
        let name = self.declare_pool(&channel, pool).await?;
        // One unacknowledged job per runner: a runner works on one run at a time.
        channel.basic_qos(1, BasicQosOptions::default()).await?;
        let consumer = channel
            .basic_consume(&name, tag, BasicConsumeOptions::default(), FieldTable::default())
            .await?;
        Ok(Box::new(RabbitConsumer {
            _channel: channel,
            consumer,
        }))
    }

    async fn ping(&self) -> Result<(), QueueError> {
        if self.conn.status().connected() && self.publisher.status().connected() {
            Ok(())
        } else {
            Err(QueueError::Broker("not connected to RabbitMQ".into()))
        }
    }
}

struct RabbitConsumer {
    _channel: Channel,
    consumer: lapin::Consumer,
}

#[async_trait]
impl JobConsumer for RabbitConsumer {
    async fn next(&mut self) -> Option<Result<Delivery, QueueError>> {
        match self.consumer.next().await? {
            Ok(d) => {
                let acker = RabbitAcker(d.acker.clone());
                Some(Ok(Delivery::new(&d.data, Box::new(acker))))
            }
            Err(e) => Some(Err(e.into())),
        }
    }
}

struct RabbitAcker(lapin::acker::Acker);

#[async_trait]
impl Acker for RabbitAcker {
    async fn ack(&self) -> Result<(), QueueError> {
        self.0.ack(BasicAckOptions::default()).await?;
        Ok(())
    }
    async fn reject(&self) -> Result<(), QueueError> {
        self.0
            .nack(BasicNackOptions {
                requeue: false,
                ..Default::default()
            })
            .await?;
        Ok(())
    }
}
