//! A RabbitMQ topology of its own per test (`tp-qtest-<uuid>`), deleted when the test
//! ends: by `cleanup` normally, or from `Drop` when the test panicked.

use std::time::Duration;

use terraplane_queue::rabbit::RabbitQueue;
use terraplane_queue::{Delivery, JobConsumer};
use terraplane_test_support::{AMQP_URL, rabbit_or_skip};

/// How long a delivery that should arrive may take; the broker pushes within milliseconds.
pub const ARRIVES: Duration = Duration::from_secs(10);
/// How long to watch for a delivery that must not arrive.
pub const QUIET: Duration = Duration::from_millis(500);

pub struct Broker {
    pub queue: RabbitQueue,
    pub prefix: String,
    pools: Vec<String>,
    cleaned: bool,
}

impl Broker {
    /// `None` (after printing why) when RabbitMQ is unreachable outside CI.
    pub async fn new(pools: &[&str]) -> Option<Broker> {
        let prefix = format!("tp-qtest-{}", uuid::Uuid::new_v4().simple());
        let queue = rabbit_or_skip(RabbitQueue::connect(AMQP_URL, &prefix).await)?;
        Some(Broker {
            queue,
            prefix,
            pools: pools.iter().map(|p| (*p).to_owned()).collect(),
            cleaned: false,
        })
    }

    /// Another connection to the same topology (as another process would have).
    pub async fn connect_again(&self) -> RabbitQueue {
        RabbitQueue::connect(AMQP_URL, &self.prefix).await.unwrap()
    }

    pub async fn cleanup(mut self) {
        let pools: Vec<&str> = self.pools.iter().map(String::as_str).collect();
        self.queue.delete_topology(&pools).await.unwrap();
        self.cleaned = true;
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if self.cleaned {
            return;
        }
        let (prefix, pools) = (self.prefix.clone(), self.pools.clone());
        // The test's runtime cannot be blocked on: clean up from a runtime of our own.
        let done = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            rt.block_on(async {
                let q = RabbitQueue::connect(AMQP_URL, &prefix).await?;
                let pools: Vec<&str> = pools.iter().map(String::as_str).collect();
                q.delete_topology(&pools).await
            })
            .map_err(|e| e.to_string())
        })
        .join();
        if !matches!(done, Ok(Ok(()))) {
            eprintln!("warning: could not delete the test topology {}: {done:?}", self.prefix);
        }
    }
}

/// The next delivery, failing the test if none arrives in time.
pub async fn next(consumer: &mut Box<dyn JobConsumer>) -> Delivery {
    match tokio::time::timeout(ARRIVES, consumer.next()).await {
        Ok(Some(Ok(d))) => d,
        Ok(Some(Err(e))) => panic!("consumer error: {e}"),
        Ok(None) => panic!("consumer closed"),
        Err(_) => panic!("no delivery within {ARRIVES:?}"),
    }
}

/// Fails the test if a delivery arrives within `QUIET`.
pub async fn nothing_more(consumer: &mut Box<dyn JobConsumer>) {
    if let Ok(got) = tokio::time::timeout(QUIET, consumer.next()).await {
        let what = got.map(|r| r.map(|d| d.message));
        panic!("expected no delivery, got {what:?}");
    }
}

/// The dead-letter queue's depth once it reaches `want` (dead-lettering is asynchronous
/// at the broker), or its last depth after a bounded wait.
pub async fn dead_letters(queue: &RabbitQueue, want: u32) -> u32 {
    let mut n = 0;
    for _ in 0..100 {
        n = queue.dead_letter_count().await.unwrap();
        if n == want {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    n
}
