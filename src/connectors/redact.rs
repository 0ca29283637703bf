//! Keeping secrets out of what an agent or a log can see: every message a connector call or a
//! token refresh returns (errors, the provider's answer) passes [`Secrets::redact`], which
//! replaces each access token, refresh token and client secret involved — as written, JSON- or
//! Debug-escaped, percent-encoded, and each line of a multi-line one — with `[redacted]`.

use serde_json::Value;

use super::catalog::ConnectorDef;
use super::credentials::Credential;

/// What replaces a secret.
pub const REDACTED: &str = "[redacted]";

/// Shortest piece of a secret replaced on its own (shorter ones would blank ordinary words).
const MIN_PIECE: usize = 6;

/// The secrets one call involves.
#[derive(Default)]
pub struct Secrets {
    forms: Vec<String>,
}

impl Secrets {
    /// The definition's client secret and the tokens of every credential given.
    pub fn of<'a>(d: Option<&ConnectorDef>, creds: impl IntoIterator<Item = &'a Credential>) -> Self {
        let mut s = Secrets::default();
        if let Some(secret) = d.and_then(ConnectorDef::client_secret) {
            s.add(&secret);
        }
        for c in creds {
            s.add(&c.access_token);
            s.add(&c.refresh_token);
        }
        s
    }

    /// Adds `secret` in every form it could be quoted in.
    pub fn add(&mut self, secret: &str) {
        if secret.is_empty() {
            return;
        }
        let json = serde_json::to_string(secret).expect("a string serialises");
        let debug = format!("{secret:?}");
        let mut forms = vec![
            secret.to_string(),
            json[1..json.len() - 1].to_string(),
            debug[1..debug.len() - 1].to_string(),
            serde_urlencoded::to_string([("", secret)]).map(|q| q[1..].to_string()).unwrap_or_default(),
        ];
        forms.extend(secret.split(|c: char| c.is_control()).filter(|p| p.len() >= MIN_PIECE).map(str::to_string));
        for f in forms {
            if !f.is_empty() && !self.forms.contains(&f) {
                self.forms.push(f);
            }
        }
        // Longest first, so a whole secret is replaced before a piece of it.
        self.forms.sort_by_key(|f| std::cmp::Reverse(f.len()));
    }

    /// `text` with every secret replaced.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        for f in &self.forms {
            if out.contains(f.as_str()) {
                out = out.replace(f.as_str(), REDACTED);
            }
        }
        out
    }

    /// `v` with every secret replaced in its strings and keys.
    pub fn redact_json(&self, v: Value) -> Value {
        match v {
            Value::String(s) => Value::String(self.redact(&s)),
            Value::Array(a) => Value::Array(a.into_iter().map(|v| self.redact_json(v)).collect()),
            Value::Object(o) => {
                Value::Object(o.into_iter().map(|(k, v)| (self.redact(&k), self.redact_json(v))).collect())
            }
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_quoted_form_is_replaced() {
        let cred = Credential {
            access_token: "tok-SECRET-1\r\nX-Injected: yes-indeed".into(),
            refresh_token: "ref/QZQZ+tok=".into(),
            ..Default::default()
        };
        let s = Secrets::of(None, [&cred]);
        for text in [
            format!("bad header 'Authorization: Bearer {}'", cred.access_token),
            format!("{:?}", cred.access_token),
            serde_json::to_string(&cred.access_token).unwrap(),
            "first line only: tok-SECRET-1".to_string(),
            "form: refresh_token=ref%2FQZQZ%2Btok%3D and ref/QZQZ+tok=".to_string(),
        ] {
            let r = s.redact(&text);
            assert!(!r.contains("SECRET") && !r.contains("Injected") && !r.contains("QZQZ"), "{r}");
            assert!(r.contains(REDACTED), "{r}");
        }
        let v = s.redact_json(serde_json::json!({ "echo": ["Bearer tok-SECRET-1", 3] }));
        assert_eq!(v, serde_json::json!({ "echo": ["Bearer [redacted]", 3] }));
        assert_eq!(s.redact("nothing secret here"), "nothing secret here");
    }
}
