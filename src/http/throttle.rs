//! Throttling token guesses without locking out the right token. Wrong tokens — a bearer token or
//! login cookie `/api/*` refuses, a failed `POST /api/auth/login` — are counted per client address
//! in a fixed window ([`AUTH_FAILURE_WINDOW_MS`]). Past [`AUTH_FAILURES_PER_WINDOW`] the address is
//! *throttled* until the window ends:
//!
//! - a secret od minted — the daemon's local token (the CLI's), a login session's cookie — is
//!   256 random bits that no rate of guessing finds, so it is always checked and always passes
//!   (`guard.rs` asks [`Throttle::may_check`] only for other tokens);
//! - any other token (a candidate for `OD_API_TOKEN`, which a person chose and may be short) is
//!   checked only while the address has checks left: [`AUTH_THROTTLED_CHECKS`] at once, then one
//!   more per window / limit (3 s). Without one the request is 429 `too-many-attempts` (with
//!   `Retry-After`: the wait for the next check) before its token is looked at, so a guesser stays
//!   at about twenty guesses a minute; with one, the right token passes (constant-time compare)
//!   and a wrong one spends the check and is 429 too;
//! - requests without a token (and the OAuth callbacks, the tool-token routes) are neither counted
//!   nor throttled.
//!
//! So after a burst of wrong tokens the right bearer token and the right login still succeed at
//! once, unless the same address keeps guessing, when they wait seconds. Time is the daemon's
//! clock; the table is bounded ([`MAX_THROTTLED_CLIENTS`]).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

use crate::clock::SharedClock;
use crate::limits::{AUTH_FAILURES_PER_WINDOW, AUTH_FAILURE_WINDOW_MS, AUTH_THROTTLED_CHECKS, MAX_THROTTLED_CLIENTS};

/// The client address of a request (set per connection by `serve.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer(pub IpAddr);

/// One address's window.
#[derive(Debug, Clone, Copy)]
struct Window {
    start: i64,
    failures: u32,
    /// When the failures reached the limit (the address is throttled from then on).
    throttled_at: Option<i64>,
    /// Wrong tokens checked since then.
    spent: u32,
}

/// What the throttle says about an address that presents a token od did not mint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Not throttled: check the token; a wrong one is the usual 401.
    Open,
    /// Throttled, with a check left: check the token; a wrong one is 429.
    Check,
    /// Throttled, no check left: 429 at once, the token unread; the ms until the next check.
    Wait(i64),
}

/// Failure counts by client address.
pub struct Throttle {
    clock: SharedClock,
    by_peer: Mutex<HashMap<IpAddr, Window>>,
}

impl Default for Throttle {
    fn default() -> Self {
        Self::new(std::sync::Arc::new(crate::clock::SystemClock))
    }
}

/// The interval at which a throttled address earns one more check.
const CHECK_EVERY_MS: i64 = AUTH_FAILURE_WINDOW_MS / AUTH_FAILURES_PER_WINDOW as i64;

impl Throttle {
    pub fn new(clock: SharedClock) -> Self {
        Self { clock, by_peer: Mutex::new(HashMap::new()) }
    }

    /// Whether `peer`'s next token (one od did not mint) may be checked.
    pub fn may_check(&self, peer: IpAddr) -> Verdict {
        let now = self.clock.now_ms();
        let map = self.by_peer.lock().expect("throttle");
        let Some(w) = map.get(&peer) else { return Verdict::Open };
        let window_end = w.start.saturating_add(AUTH_FAILURE_WINDOW_MS);
        let Some(at) = w.throttled_at.filter(|_| window_end > now) else { return Verdict::Open };
        let earned = now.saturating_sub(at) / CHECK_EVERY_MS;
        let allowed = i64::from(AUTH_THROTTLED_CHECKS).saturating_add(earned);
        if i64::from(w.spent) < allowed {
            return Verdict::Check;
        }
        // The next check comes with the next interval, or with the window's end.
        let next = at.saturating_add((earned + 1).saturating_mul(CHECK_EVERY_MS));
        Verdict::Wait(next.min(window_end).saturating_sub(now).max(1))
    }

    /// Counts one wrong token from `peer`; whether the address is throttled now.
    pub fn failed(&self, peer: IpAddr) -> bool {
        let now = self.clock.now_ms();
        let mut map = self.by_peer.lock().expect("throttle");
        if !map.contains_key(&peer) && map.len() >= MAX_THROTTLED_CLIENTS {
            map.retain(|_, w| w.start.saturating_add(AUTH_FAILURE_WINDOW_MS) > now);
            if map.len() >= MAX_THROTTLED_CLIENTS {
                if let Some(oldest) = map.iter().min_by_key(|(_, w)| w.start).map(|(k, _)| *k) {
                    map.remove(&oldest);
                }
            }
        }
        let fresh = Window { start: now, failures: 0, throttled_at: None, spent: 0 };
        let w = map.entry(peer).or_insert(fresh);
        if w.start.saturating_add(AUTH_FAILURE_WINDOW_MS) <= now {
            *w = fresh;
        }
        if w.throttled_at.is_some() {
            w.spent = w.spent.saturating_add(1);
        } else {
            w.failures = w.failures.saturating_add(1);
            if w.failures >= AUTH_FAILURES_PER_WINDOW {
                w.throttled_at = Some(now);
            }
        }
        w.throttled_at.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    #[test]
    fn a_throttled_address_keeps_a_few_checks_then_one_per_interval_until_the_window_ends() {
        let clock = ManualClock::at(1_000);
        let t = Throttle::new(std::sync::Arc::new(clock.clone()));
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        for _ in 0..AUTH_FAILURES_PER_WINDOW - 1 {
            assert!(!t.failed(a));
        }
        assert_eq!(t.may_check(a), Verdict::Open);
        assert!(t.failed(a), "the limit reached");
        assert_eq!(t.may_check(b), Verdict::Open, "per address");
        for _ in 0..AUTH_THROTTLED_CHECKS {
            assert_eq!(t.may_check(a), Verdict::Check);
            t.failed(a);
        }
        assert_eq!(t.may_check(a), Verdict::Wait(CHECK_EVERY_MS));
        clock.advance(CHECK_EVERY_MS - 1);
        assert_eq!(t.may_check(a), Verdict::Wait(1));
        clock.advance(1);
        assert_eq!(t.may_check(a), Verdict::Check, "one more per interval");
        t.failed(a);
        assert!(matches!(t.may_check(a), Verdict::Wait(_)));
        clock.advance(AUTH_FAILURE_WINDOW_MS);
        assert_eq!(t.may_check(a), Verdict::Open, "the window ended");
        assert!(!t.failed(a), "a new window counts from zero");
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
