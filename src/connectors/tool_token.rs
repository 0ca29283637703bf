//! Scoped tool tokens: what a run's agent presents to call connectors (`OD_TOOL_TOKEN`,
//! `Authorization: Bearer`). A token names its run and its snapshot and carries an expiry,
//! sealed with a keyed blake3 MAC under a key this process minted at start — so it cannot be
//! forged or moved to another run, and it dies with the daemon. It carries no rights of its own:
//! every call re-reads the run's snapshot and the plugin's current trust and grants.

use crate::ids::mint_token;

/// A verified token's claims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claims {
    pub run_id: String,
    pub snapshot_id: String,
    pub expires_at: i64,
}

/// Why a token was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TokenError {
    #[error("missing tool token (send Authorization: Bearer $OD_TOOL_TOKEN)")]
    Missing,
    #[error("the tool token is not one this daemon issued")]
    Invalid,
    #[error("the tool token expired")]
    Expired,
}

/// The prefix every tool token starts with.
pub const PREFIX: &str = "odtt.";

/// Mints and verifies tokens with this process's key.
pub struct ToolTokens {
    key: [u8; 32],
}

impl Default for ToolTokens {
    fn default() -> Self {
        let hex = mint_token();
        let mut key = [0u8; 32];
        for (i, k) in key.iter_mut().enumerate() {
            *k = u8::from_str_radix(&hex[i * 2..i * 2 + 2], 16).expect("hex");
        }
        Self { key }
    }
}

fn ok_part(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

impl ToolTokens {
    fn mac(&self, body: &str) -> String {
        blake3::keyed_hash(&self.key, body.as_bytes()).to_hex().to_string()
    }

    /// A token for `run_id` (running snapshot `snapshot_id`) valid until `expires_at` (unix ms).
    pub fn mint(&self, run_id: &str, snapshot_id: &str, expires_at: i64) -> String {
        let body = format!("{run_id}.{}.{expires_at}", if snapshot_id.is_empty() { "-" } else { snapshot_id });
        format!("{PREFIX}{body}.{}", self.mac(&body))
    }

    /// The claims of `token`, if it is genuine and not expired at `now`.
    pub fn verify(&self, token: &str, now: i64) -> Result<Claims, TokenError> {
        let rest = token.strip_prefix(PREFIX).ok_or(TokenError::Invalid)?;
        let (body, mac) = rest.rsplit_once('.').ok_or(TokenError::Invalid)?;
        let want = self.mac(body);
        let same = want.len() == mac.len() && want.bytes().zip(mac.bytes()).fold(0u8, |a, (x, y)| a | (x ^ y)) == 0;
        if !same {
            return Err(TokenError::Invalid);
        }
        let mut parts = body.splitn(3, '.');
        let (run, snap, exp) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        if !ok_part(run) || !ok_part(snap) {
            return Err(TokenError::Invalid);
        }
        let expires_at: i64 = exp.parse().map_err(|_| TokenError::Invalid)?;
        if now >= expires_at {
            return Err(TokenError::Expired);
        }
        Ok(Claims {
            run_id: run.into(),
            snapshot_id: if snap == "-" { String::new() } else { snap.into() },
            expires_at,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_tokens_verify_and_tampering_fails() {
        let t = ToolTokens::default();
        let tok = t.mint("r_1", "s_2", 1_000);
        assert_eq!(
            t.verify(&tok, 999).unwrap(),
            Claims { run_id: "r_1".into(), snapshot_id: "s_2".into(), expires_at: 1_000 }
        );
        assert_eq!(t.verify(&tok, 1_000), Err(TokenError::Expired));
        assert_eq!(t.verify(&tok.replace("r_1", "r_2"), 1), Err(TokenError::Invalid));
        assert_eq!(t.verify(&tok.replace(".1000.", ".9000."), 1), Err(TokenError::Invalid));
        assert_eq!(ToolTokens::default().verify(&tok, 1), Err(TokenError::Invalid));
        assert_eq!(t.verify("odtt.x", 1), Err(TokenError::Invalid));
        assert_eq!(t.verify(&t.mint("r", "", 5), 1).unwrap().snapshot_id, "");
    }
}
