//! The RabbitMQ queue: round trip, redelivery of unacknowledged jobs, one job at a time
//! per consumer, and poison messages dead-lettered.

use terraplane_domain::{RunId, RunPhase};
use terraplane_protocol::JobMessage;
use terraplane_queue::JobQueue;

use crate::harness::{Broker, dead_letters, next, nothing_more};

#[tokio::test]
async fn published_message_is_consumed_unchanged() {
    let Some(b) = Broker::new(&["default"]).await else {
        return;
    };
    b.queue.ping().await.unwrap();
    let plan = JobMessage::new(RunId::new(), RunPhase::Plan);
    let apply = JobMessage::new(RunId::new(), RunPhase::Apply);
    b.queue.publish("default", &plan).await.unwrap();
    b.queue.publish("default", &apply).await.unwrap();

    let mut c = b.queue.consume("default", "c1").await.unwrap();
    let d = next(&mut c).await;
    assert_eq!(d.message, Ok(plan));
    d.ack().await.unwrap();
    let d = next(&mut c).await;
    assert_eq!(d.message, Ok(apply));
    d.ack().await.unwrap();
    nothing_more(&mut c).await;
    assert_eq!(b.queue.dead_letter_count().await.unwrap(), 0);
    drop(c);
    b.cleanup().await;
}

#[tokio::test]
async fn pools_are_separate_queues() {
    let Some(b) = Broker::new(&["default", "gpu"]).await else {
        return;
    };
    let msg = JobMessage::new(RunId::new(), RunPhase::Plan);
    b.queue.publish("gpu", &msg).await.unwrap();
    let mut other = b.queue.consume("default", "c-default").await.unwrap();
    let mut gpu = b.queue.consume("gpu", "c-gpu").await.unwrap();
    let d = next(&mut gpu).await;
    assert_eq!(d.message, Ok(msg));
    d.ack().await.unwrap();
    nothing_more(&mut other).await;
    drop((other, gpu));
    b.cleanup().await;
}

#[tokio::test]
async fn unacked_message_is_redelivered_to_the_next_consumer() {
    let Some(b) = Broker::new(&["default"]).await else {
        return;
    };
    let msg = JobMessage::new(RunId::new(), RunPhase::Apply);
    b.queue.publish("default", &msg).await.unwrap();

    // A runner takes the job and dies before acknowledging it.
    let mut dying = b.queue.consume("default", "dying").await.unwrap();
    let d = next(&mut dying).await;
    assert_eq!(d.message.as_ref(), Ok(&msg));
    drop(d);
    drop(dying);

    let mut c = b.queue.consume("default", "survivor").await.unwrap();
    let d = next(&mut c).await;
    assert_eq!(d.message, Ok(msg));
    d.ack().await.unwrap();
    nothing_more(&mut c).await;
    drop(c);
    b.cleanup().await;
}

#[tokio::test]
async fn published_message_survives_the_publisher_connection() {
    let Some(b) = Broker::new(&["default"]).await else {
        return;
    };
    let msg = JobMessage::new(RunId::new(), RunPhase::Plan);
    let publisher = b.connect_again().await;
    publisher.publish("default", &msg).await.unwrap();
    drop(publisher);

    let mut c = b.queue.consume("default", "c1").await.unwrap();
    let d = next(&mut c).await;
    assert_eq!(d.message, Ok(msg));
    d.ack().await.unwrap();
    drop(c);
    b.cleanup().await;
}

#[tokio::test]
async fn a_consumer_holds_one_unacknowledged_job_at_a_time() {
    let Some(b) = Broker::new(&["default"]).await else {
        return;
    };
    let first = JobMessage::new(RunId::new(), RunPhase::Plan);
    let second = JobMessage::new(RunId::new(), RunPhase::Plan);
    b.queue.publish("default", &first).await.unwrap();
    b.queue.publish("default", &second).await.unwrap();

    let mut busy = b.queue.consume("default", "busy").await.unwrap();
    let held = next(&mut busy).await;
    assert_eq!(held.message.as_ref(), Ok(&first));
    // While the first job is unacknowledged, the second is not pushed to this consumer…
    nothing_more(&mut busy).await;
    // …so an idle consumer can take it.
    let mut idle = b.queue.consume("default", "idle").await.unwrap();
    let d = next(&mut idle).await;
    assert_eq!(d.message, Ok(second));
    d.ack().await.unwrap();

    // After the ack, the busy consumer gets the next job.
    held.ack().await.unwrap();
    drop(idle);
    let third = JobMessage::new(RunId::new(), RunPhase::Apply);
    b.queue.publish("default", &third).await.unwrap();
    let d = next(&mut busy).await;
    assert_eq!(d.message, Ok(third));
    d.ack().await.unwrap();
    drop(busy);
    b.cleanup().await;
}

#[tokio::test]
async fn unparsable_message_is_an_error_and_is_dead_lettered() {
    let Some(b) = Broker::new(&["default"]).await else {
        return;
    };
    b.queue.publish_raw("default", b"not json at all").await.unwrap();
    let mut c = b.queue.consume("default", "c1").await.unwrap();
    let d = next(&mut c).await;
    assert!(d.message.is_err(), "parsed garbage: {:?}", d.message);
    d.reject().await.unwrap();
    assert_eq!(dead_letters(&b.queue, 1).await, 1);
    // Rejected means gone from the job queue, not requeued.
    nothing_more(&mut c).await;
    drop(c);
    b.cleanup().await;
}

#[tokio::test]
async fn message_of_an_unknown_version_is_an_error_and_is_dead_lettered() {
    let Some(b) = Broker::new(&["default"]).await else {
        return;
    };
    let body = format!(r#"{{"v":99,"run_id":"{}","phase":"plan"}}"#, RunId::new());
    b.queue.publish_raw("default", body.as_bytes()).await.unwrap();
    let good = JobMessage::new(RunId::new(), RunPhase::Plan);
    b.queue.publish("default", &good).await.unwrap();

    let mut c = b.queue.consume("default", "c1").await.unwrap();
    let d = next(&mut c).await;
    match &d.message {
        Err(e) => assert!(e.contains("99"), "the error does not name the version: {e}"),
        Ok(m) => panic!("accepted a v99 message as {m:?}"),
    }
    d.reject().await.unwrap();
    // The poison message does not hold up the next job.
    let d = next(&mut c).await;
    assert_eq!(d.message, Ok(good));
    d.ack().await.unwrap();
    assert_eq!(dead_letters(&b.queue, 1).await, 1);
    drop(c);
    b.cleanup().await;
}
