//! Browser sessions: what a login mints. A correct `POST /api/auth/login` creates a session of its
//! own — a fresh random secret (256 bits, from the OS) that the login cookie carries instead of
//! the token it was logged in with — so the cookie is worth less than the token: it expires
//! ([`SESSION_TTL_MS`]), it is revoked by logout, by `od daemon sessions revoke` or
//! `DELETE /api/auth/sessions[/{id}]`, and it never works as a bearer token.
//!
//! Only the secret's blake3 hash is kept, in memory: a daemon restart ends every session (a person
//! logs in again), and nothing on disk or in the log can be replayed as a cookie. A session's
//! public id is a prefix of that hash: it names the session for listing and revoking, and says
//! nothing about the secret. Time is the daemon's clock; the table is bounded ([`MAX_SESSIONS`]:
//! beyond it expired sessions go first, then the oldest).

use serde::Serialize;
use std::collections::HashMap;
use std::sync::Mutex;

use crate::clock::SharedClock;
use crate::limits::{MAX_SESSIONS, SESSION_TTL_MS};

/// One live session, as listed (never its secret).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionInfo {
    /// The session's public id (16 hex digits).
    pub id: String,
    /// When it was minted (unix ms).
    pub created_at: i64,
    /// When it stops working (unix ms).
    pub expires_at: i64,
}

/// A session just minted: the secret for the cookie, once.
pub struct Minted {
    pub secret: String,
    pub info: SessionInfo,
}

/// The live sessions, by the hash of their secret.
pub struct Sessions {
    clock: SharedClock,
    by_hash: Mutex<HashMap<[u8; 32], SessionInfo>>,
}

impl Default for Sessions {
    fn default() -> Self {
        Self::new(std::sync::Arc::new(crate::clock::SystemClock))
    }
}

fn hash(secret: &str) -> [u8; 32] {
    *blake3::hash(secret.as_bytes()).as_bytes()
}

fn public_id(h: &[u8; 32]) -> String {
    h[..8].iter().map(|b| format!("{b:02x}")).collect()
}

impl Sessions {
    pub fn new(clock: SharedClock) -> Self {
        Self { clock, by_hash: Mutex::new(HashMap::new()) }
    }

    /// A new session, expiring [`SESSION_TTL_MS`] from now.
    pub fn mint(&self) -> Minted {
        let secret = super::auth::mint_token();
        let h = hash(&secret);
        let now = self.clock.now_ms();
        let info = SessionInfo { id: public_id(&h), created_at: now, expires_at: now.saturating_add(SESSION_TTL_MS) };
        let mut map = self.by_hash.lock().expect("sessions");
        if map.len() >= MAX_SESSIONS {
            map.retain(|_, s| s.expires_at > now);
            while map.len() >= MAX_SESSIONS {
                let Some(oldest) = map.iter().min_by_key(|(_, s)| s.created_at).map(|(k, _)| *k) else { break };
                map.remove(&oldest);
            }
        }
        map.insert(h, info.clone());
        Minted { secret, info }
    }

    /// Whether `secret` is a live session's (an expired one is dropped). The lookup is by hash,
    /// so its timing says nothing about the secrets held.
    pub fn valid(&self, secret: &str) -> bool {
        let h = hash(secret);
        let now = self.clock.now_ms();
        let mut map = self.by_hash.lock().expect("sessions");
        match map.get(&h) {
            Some(s) if s.expires_at > now => true,
            Some(_) => {
                map.remove(&h);
                false
            }
            None => false,
        }
    }

    /// Ends the session whose secret this is (logout); whether there was one.
    pub fn revoke_secret(&self, secret: &str) -> bool {
        self.by_hash.lock().expect("sessions").remove(&hash(secret)).is_some()
    }

    /// Ends the session with public id `id`; whether there was one.
    pub fn revoke(&self, id: &str) -> bool {
        let mut map = self.by_hash.lock().expect("sessions");
        let before = map.len();
        map.retain(|_, s| s.id != id);
        map.len() < before
    }

    /// Ends every session; how many there were.
    pub fn revoke_all(&self) -> usize {
        let mut map = self.by_hash.lock().expect("sessions");
        let n = map.len();
        map.clear();
        n
    }

    /// The live sessions, oldest first.
    pub fn list(&self) -> Vec<SessionInfo> {
        let now = self.clock.now_ms();
        let mut v: Vec<SessionInfo> =
            self.by_hash.lock().expect("sessions").values().filter(|s| s.expires_at > now).cloned().collect();
        v.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    #[test]
    fn a_session_lives_until_it_expires_or_is_revoked() {
        let clock = ManualClock::at(1_000);
        let s = Sessions::new(std::sync::Arc::new(clock.clone()));
        let a = s.mint();
        let b = s.mint();
        assert_ne!(a.secret, b.secret);
        assert!(s.valid(&a.secret) && s.valid(&b.secret));
        assert!(!s.valid("guess"));
        assert_eq!(s.list().len(), 2);
        assert!(s.revoke(&b.info.id));
        assert!(!s.valid(&b.secret));
        clock.advance(SESSION_TTL_MS - 1);
        assert!(s.valid(&a.secret));
        clock.advance(1);
        assert!(!s.valid(&a.secret), "expired");
        assert!(s.list().is_empty());
        let c = s.mint();
        assert!(s.revoke_secret(&c.secret) && !s.valid(&c.secret));
        assert!(!s.revoke_secret(&c.secret));
    }

    #[test]
    fn the_table_is_bounded() {
        let s = Sessions::default();
        for _ in 0..MAX_SESSIONS + 5 {
            s.mint();
        }
        assert!(s.by_hash.lock().unwrap().len() <= MAX_SESSIONS);
    }
}
