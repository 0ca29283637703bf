//! Throttling token guesses. Wrong tokens — a bearer token or login cookie `/api/*` refuses, a
//! failed `POST /api/auth/login` — are counted per client address in a fixed window
//! ([`AUTH_FAILURE_WINDOW_MS`]); past [`AUTH_FAILURES_PER_WINDOW`] every request of that address
//! that carries a token, and every login, is answered 429 `too-many-attempts` (with
//! `Retry-After`) until the window ends, before its token is checked, so a guess made meanwhile
//! learns nothing. Requests without a token (and the OAuth callbacks, the tool-token routes) are
//! neither counted nor blocked. Time is the daemon's clock; the table is bounded
//! ([`MAX_THROTTLED_CLIENTS`]).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

use crate::clock::SharedClock;
use crate::limits::{AUTH_FAILURES_PER_WINDOW, AUTH_FAILURE_WINDOW_MS, MAX_THROTTLED_CLIENTS};

/// The client address of a request (set per connection by `serve.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer(pub IpAddr);

/// Failure counts by client address.
pub struct Throttle {
    clock: SharedClock,
    /// address → (window start, failures in it)
    by_peer: Mutex<HashMap<IpAddr, (i64, u32)>>,
}

impl Default for Throttle {
    fn default() -> Self {
        Self::new(std::sync::Arc::new(crate::clock::SystemClock))
    }
}

impl Throttle {
    pub fn new(clock: SharedClock) -> Self {
        Self { clock, by_peer: Mutex::new(HashMap::new()) }
    }

    /// How many ms `peer` must still wait, when it is blocked.
    pub fn blocked(&self, peer: IpAddr) -> Option<i64> {
        let now = self.clock.now_ms();
        let map = self.by_peer.lock().expect("throttle");
        let (start, failures) = *map.get(&peer)?;
        let left = start.saturating_add(AUTH_FAILURE_WINDOW_MS).saturating_sub(now);
        (failures >= AUTH_FAILURES_PER_WINDOW && left > 0).then_some(left)
    }

    /// Counts one wrong token from `peer`.
    pub fn failed(&self, peer: IpAddr) {
        let now = self.clock.now_ms();
        let mut map = self.by_peer.lock().expect("throttle");
        if !map.contains_key(&peer) && map.len() >= MAX_THROTTLED_CLIENTS {
            map.retain(|_, (start, _)| start.saturating_add(AUTH_FAILURE_WINDOW_MS) > now);
            if map.len() >= MAX_THROTTLED_CLIENTS {
                if let Some(oldest) = map.iter().min_by_key(|(_, (s, _))| *s).map(|(k, _)| *k) {
                    map.remove(&oldest);
                }
            }
        }
        let e = map.entry(peer).or_insert((now, 0));
        if e.0.saturating_add(AUTH_FAILURE_WINDOW_MS) <= now {
            *e = (now, 0);
        }
        e.1 = e.1.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    #[test]
    fn blocks_past_the_limit_until_the_window_ends() {
        let clock = ManualClock::at(1_000);
        let t = Throttle::new(std::sync::Arc::new(clock.clone()));
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        for _ in 0..AUTH_FAILURES_PER_WINDOW - 1 {
            t.failed(a);
        }
        assert_eq!(t.blocked(a), None);
        t.failed(a);
        assert_eq!(t.blocked(a), Some(AUTH_FAILURE_WINDOW_MS));
        assert_eq!(t.blocked(b), None, "per address");
        clock.advance(AUTH_FAILURE_WINDOW_MS - 1);
        assert_eq!(t.blocked(a), Some(1));
        clock.advance(1);
        assert_eq!(t.blocked(a), None);
        t.failed(a);
        assert_eq!(t.blocked(a), None, "a new window counts from zero");
    }

    #[test]
    fn the_table_is_bounded() {
        let t = Throttle::default();
        for i in 0..(MAX_THROTTLED_CLIENTS as u32 + 10) {
            t.failed(IpAddr::from(std::net::Ipv4Addr::from(i)));
        }
        assert!(t.by_peer.lock().unwrap().len() <= MAX_THROTTLED_CLIENTS);
    }
}
