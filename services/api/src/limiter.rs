//! Failed-login throttling: after `FREE_FAILURES` consecutive failures for one email from
//! one address, further attempts are refused for a delay that doubles with each failure
//! (1 s, 2 s, 4 s, … capped at 15 minutes). A success clears the record. In memory per api
//! process: a restart forgives, several replicas each count on their own.

use std::collections::HashMap;
use std::sync::Mutex;

use chrono::{DateTime, Duration, Utc};

const FREE_FAILURES: u32 = 5;
const MAX_DELAY_SECS: i64 = 15 * 60;
const MAX_ENTRIES: usize = 100_000;

#[derive(Clone, Copy, Debug)]
struct Record {
    failures: u32,
    blocked_until: Option<DateTime<Utc>>,
    last: DateTime<Utc>,
}

#[derive(Default)]
pub struct LoginLimiter {
    records: Mutex<HashMap<(String, String), Record>>,
}

fn key(email: &str, ip: Option<&str>) -> (String, String) {
    (email.trim().to_lowercase(), ip.unwrap_or("").to_owned())
}

impl LoginLimiter {
    /// `Err(seconds to wait)` while attempts for this email and address are blocked.
    pub fn check(&self, email: &str, ip: Option<&str>, now: DateTime<Utc>) -> Result<(), i64> {
        let Ok(records) = self.records.lock() else {
            return Ok(());
        };
        match records.get(&key(email, ip)).and_then(|r| r.blocked_until) {
            Some(until) if until > now => Err((until - now).num_seconds().max(1)),
            _ => Ok(()),
        }
    }

    pub fn failed(&self, email: &str, ip: Option<&str>, now: DateTime<Utc>) {
        let Ok(mut records) = self.records.lock() else { return };
        if records.len() >= MAX_ENTRIES {
            records.retain(|_, r| now - r.last < Duration::hours(1));
        }
        let r = records.entry(key(email, ip)).or_insert(Record {
            failures: 0,
            blocked_until: None,
            last: now,
        });
        r.failures += 1;
        r.last = now;
        if r.failures >= FREE_FAILURES {
            let exp = (r.failures - FREE_FAILURES).min(20);
            let delay = (1i64 << exp).min(MAX_DELAY_SECS);
            r.blocked_until = Some(now + Duration::seconds(delay));
        }
    }

    pub fn succeeded(&self, email: &str, ip: Option<&str>) {
        if let Ok(mut records) = self.records.lock() {
            records.remove(&key(email, ip));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_after_free_failures_with_doubling_delays() {
        let l = LoginLimiter::default();
        let t0 = DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        for _ in 0..4 {
            l.failed("A@x.io", Some("1.2.3.4"), t0);
            assert_eq!(l.check("a@x.io", Some("1.2.3.4"), t0), Ok(()));
        }
        l.failed("a@x.io", Some("1.2.3.4"), t0);
        assert_eq!(l.check("a@x.io", Some("1.2.3.4"), t0), Err(1));
        // Another address is counted separately.
        assert_eq!(l.check("a@x.io", Some("5.6.7.8"), t0), Ok(()));
        let t1 = t0 + Duration::seconds(1);
        assert_eq!(l.check("a@x.io", Some("1.2.3.4"), t1), Ok(()));
        l.failed("a@x.io", Some("1.2.3.4"), t1);
        assert_eq!(l.check("a@x.io", Some("1.2.3.4"), t1), Err(2));
        for _ in 0..30 {
            l.failed("a@x.io", Some("1.2.3.4"), t1);
        }
        assert_eq!(l.check("a@x.io", Some("1.2.3.4"), t1), Err(MAX_DELAY_SECS));
        l.succeeded("a@x.io", Some("1.2.3.4"));
        assert_eq!(l.check("a@x.io", Some("1.2.3.4"), t1), Ok(()));
    }
}
