//! Ships a phase's output to the api as numbered chunks, in order, without gaps: lines are
//! batched for up to 100 ms or 32 KiB, each chunk is retried with its sequence number until
//! the api has it (the api accepts an identical retry), and `finish` waits for the last.
//! Every byte passes a [`StreamMasker`] first: secret values (and their encodings) never
//! leave the runner, even when one is split across two chunks.

use std::time::Duration;

use terraplane_domain::mask::{Masker, StreamMasker};
use terraplane_protocol::JobSpec;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::api::{RunnerApi, with_retry};

const MAX_CHUNK: usize = 32 * 1024;
const FLUSH_EVERY: Duration = Duration::from_millis(100);

enum Msg {
    Text(String),
    /// A secret learned during the phase (temporary cloud credentials): masked from here on.
    Secret(String),
}

#[derive(Clone)]
pub struct LogSink(mpsc::UnboundedSender<Msg>);

impl LogSink {
    /// Queues one line (a newline is added).
    pub fn line(&self, line: impl Into<String>) {
        let mut l = line.into();
        l.push('\n');
        let _ = self.0.send(Msg::Text(l));
    }

    /// Masks `secret` in everything queued after this call.
    pub fn secret(&self, secret: impl Into<String>) {
        let _ = self.0.send(Msg::Secret(secret.into()));
    }
}

pub struct LogShipper {
    sink: LogSink,
    task: JoinHandle<Result<i64, String>>,
}

impl LogShipper {
    pub fn start(api: RunnerApi, spec: JobSpec, masker: Masker) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(ship(api, spec, rx, StreamMasker::new(masker)));
        Self {
            sink: LogSink(tx),
            task,
        }
    }

    pub fn sink(&self) -> LogSink {
        self.sink.clone()
    }

    /// Flushes everything queued and returns the next free sequence number.
    pub async fn finish(self) -> Result<i64, String> {
        drop(self.sink);
        self.task.await.map_err(|e| e.to_string())?
    }
}

async fn ship(
    api: RunnerApi,
    spec: JobSpec,
    mut rx: mpsc::UnboundedReceiver<Msg>,
    mut masker: StreamMasker,
) -> Result<i64, String> {
    let mut seq = spec.log_seq_start;
    let mut buf = String::new();
    let mut open = true;
    /// Takes one message into `buf` (masked); false when the channel closed.
    fn take(m: Option<Msg>, buf: &mut String, masker: &mut StreamMasker) -> bool {
        match m {
            Some(Msg::Text(t)) => {
                buf.push_str(&masker.push(&t));
                true
            }
            Some(Msg::Secret(s)) => {
                masker.add_secret(&s);
                true
            }
            None => {
                buf.push_str(&masker.finish());
                false
            }
        }
    }
    while open {
        // Wait for the first line of a chunk, then gather more for a short while.
        open = take(rx.recv().await, &mut buf, &mut masker);
        let deadline = tokio::time::sleep(FLUSH_EVERY);
        tokio::pin!(deadline);
        while open && buf.len() < MAX_CHUNK {
            tokio::select! {
                _ = &mut deadline => break,
                m = rx.recv() => open = take(m, &mut buf, &mut masker),
            }
        }
        while !buf.is_empty() {
            let cut = cut_point(&buf);
            let chunk: String = buf.drain(..cut).collect();
            with_retry(8, || api.append_log(&spec, seq, &chunk))
                .await
                .map_err(|e| e.to_string())?;
            seq += 1;
        }
    }
    Ok(seq)
}

/// Where to split a buffer into a chunk of at most MAX_CHUNK bytes, on a char boundary.
fn cut_point(buf: &str) -> usize {
    if buf.len() <= MAX_CHUNK {
        return buf.len();
    }
    let mut i = MAX_CHUNK;
    while !buf.is_char_boundary(i) {
        i -= 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_on_char_boundaries() {
        let s = "é".repeat(MAX_CHUNK);
        let c = cut_point(&s);
        assert!(c <= MAX_CHUNK && s.is_char_boundary(c));
        assert_eq!(cut_point("short"), 5);
    }
}
