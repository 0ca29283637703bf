//! The outbound HTTP client: every request passes [`super::url_rule`] first, every address a host
//! resolves to is checked again (od's own listeners refused, plain http only to loopback), a
//! redirect is followed only to the same host (and checked again), the whole request — redirects
//! and body included — stops at one deadline, and a body is read up to a size bound.
//!
//! The transport is ureq with rustls, configured by [`super::tls`] (what is trusted); a refused
//! certificate is [`OutboundError::Tls`], naming the URL and the problem. Besides the deadline:
//! a connect timeout, a read timeout ([`super::stall`]), and the proxy the environment names
//! ([`super::proxy`]). [`OutboundError::code`] is the code of the failures every caller names
//! alike (TLS, downgrade, proxy setting).

use std::io::Read;
use std::sync::Arc;
use std::time::{Duration, Instant};
use url::Url;

use super::proxy::{self, ProxyError};
use super::stall::{self, Stalled};
use super::tls::{self, CertProblem, TlsSetupError};
use super::url_rule::{check_redirect, check_url, redact, refused_in, resolve_checked, UrlRefused};
use crate::limits::{
    MAX_OUTBOUND_REDIRECTS, OUTBOUND_CONNECT_TIMEOUT_MS, OUTBOUND_READ_TIMEOUT_MS, OUTBOUND_TIMEOUT_MS,
};

/// Why an outbound request failed.
#[derive(Debug, thiserror::Error)]
pub enum OutboundError {
    /// The URL (or a redirect) broke the URL rule.
    #[error(transparent)]
    Refused(#[from] UrlRefused),
    /// The server answered an HTTP error status.
    #[error("{url}: the server answered HTTP {status}")]
    Status { url: String, status: u16 },
    /// The answer was larger than the bound.
    #[error("{url}: the answer is larger than {limit} bytes")]
    TooLarge { url: String, limit: u64 },
    /// No complete answer before the deadline.
    #[error("{url}: no complete answer within {ms} ms")]
    Deadline { url: String, ms: u128 },
    /// The server's certificate was refused (untrusted, wrong host, expired).
    #[error("{url}: {problem}")]
    Tls { url: String, problem: CertProblem },
    /// No TLS client could be set up (a CA file that cannot be read, no roots at all).
    #[error(transparent)]
    TlsSetup(#[from] TlsSetupError),
    /// A proxy variable cannot be used (named, without its credentials).
    #[error(transparent)]
    Proxy(#[from] ProxyError),
    /// The server sent nothing for the read timeout.
    #[error("{url}: {stalled}")]
    Stalled { url: String, stalled: Stalled },
    /// Connecting, sending or reading failed.
    #[error("{url}: {message}")]
    Transport { url: String, message: String },
}

impl OutboundError {
    /// The stable code of a failure every caller names the same way: a refused certificate
    /// ([`CertProblem::code`]: `tls-untrusted`, `tls-wrong-host`, `tls-expired`,
    /// `tls-certificate`), a redirect from https to http (`tls-downgrade`), no TLS client
    /// (`tls-setup`: a bad `OD_CA_FILE`, no roots), a malformed proxy variable (`proxy-config`).
    /// `None` for the rest, which each caller names in its own terms (`fetch-failed`, ...).
    pub fn code(&self) -> Option<&'static str> {
        match self {
            Self::Tls { problem, .. } => Some(problem.code()),
            Self::Refused(UrlRefused::Downgrade { .. }) => Some("tls-downgrade"),
            Self::TlsSetup(_) => Some("tls-setup"),
            Self::Proxy(_) => Some("proxy-config"),
            _ => None,
        }
    }

    /// Whether the failure is od's own setting (`tls-setup`, `proxy-config`: HTTP 500), not the
    /// server's (HTTP 502).
    pub fn is_local(&self) -> bool {
        matches!(self, Self::TlsSetup(_) | Self::Proxy(_))
    }

    /// What an error envelope's `data` says about it: the URL, or the setting to fix.
    pub fn data(&self) -> serde_json::Value {
        match self {
            Self::Tls { url, .. } | Self::Stalled { url, .. } => serde_json::json!({ "url": url }),
            Self::Refused(UrlRefused::Downgrade { from, to }) => serde_json::json!({ "url": from, "location": to }),
            Self::TlsSetup(TlsSetupError::CaFile { setting, .. }) => serde_json::json!({ "setting": setting }),
            Self::Proxy(p) => serde_json::json!({ "setting": p.var }),
            _ => serde_json::Value::Null,
        }
    }
}

/// A duration setting in ms from the environment (`var`), else `default`; 0 or junk is ignored.
fn ms_setting(var: &str, default: u64) -> Duration {
    let ms = std::env::var(var).ok().and_then(|v| v.parse().ok()).filter(|v| *v > 0);
    Duration::from_millis(ms.unwrap_or(default))
}

/// The deadline outbound fetches get unless their caller has its own: `OD_OUTBOUND_TIMEOUT_MS`,
/// else [`OUTBOUND_TIMEOUT_MS`].
pub fn default_deadline() -> Duration {
    ms_setting("OD_OUTBOUND_TIMEOUT_MS", OUTBOUND_TIMEOUT_MS)
}

/// `OD_OUTBOUND_CONNECT_TIMEOUT_MS`, else [`OUTBOUND_CONNECT_TIMEOUT_MS`].
pub fn connect_timeout() -> Duration {
    ms_setting("OD_OUTBOUND_CONNECT_TIMEOUT_MS", OUTBOUND_CONNECT_TIMEOUT_MS)
}

/// `OD_OUTBOUND_READ_TIMEOUT_MS`, else [`OUTBOUND_READ_TIMEOUT_MS`].
pub fn read_timeout() -> Duration {
    ms_setting("OD_OUTBOUND_READ_TIMEOUT_MS", OUTBOUND_READ_TIMEOUT_MS)
}

/// The address policy on a target reached through a proxy. Without a proxy every address the
/// target's name resolves to passes [`resolve_checked`]; through a proxy od never connects to
/// those addresses (the proxy resolves the name), so the target's literal address, or what its
/// name resolves to here, is checked before the request ([`super::url_rule::check_target`]).
fn check_proxied_target(url: &Url) -> Result<(), OutboundError> {
    super::url_rule::check_target(url.as_str())?;
    Ok(())
}

/// One outbound request's bounds.
#[derive(Debug, Clone, Copy)]
pub struct Outbound {
    /// The whole request: connect, redirects, headers and body.
    pub deadline: Duration,
    /// The largest body read.
    pub max_bytes: u64,
}

/// A fetched body and the URL it finally came from.
#[derive(Debug)]
pub struct Fetched {
    pub url: String,
    pub status: u16,
    pub content_type: Option<String>,
    pub body: Vec<u8>,
}

impl Outbound {
    pub fn new(deadline: Duration, max_bytes: u64) -> Self {
        Self { deadline, max_bytes }
    }

    /// An agent for `url` (already checked): od's TLS config under the read timeout, the
    /// checked resolver, no redirects of its own, the deadline as ureq's overall timeout, the
    /// connect timeout, and the proxy the environment names for `url` (the resolver then checks
    /// the proxy's address: plain http, loopback only, needs a proxy on loopback too).
    pub fn agent(&self, url: &Url) -> Result<ureq::Agent, OutboundError> {
        let loopback_only = url.scheme() == "http";
        let tls = stall::Connector { tls: tls::client_config()?, read_timeout: read_timeout() };
        let mut b = ureq::AgentBuilder::new()
            .tls_connector(Arc::new(tls))
            .timeout(self.deadline)
            .timeout_connect(connect_timeout().min(self.deadline))
            .redirects(0)
            .resolver(move |netloc: &str| resolve_checked(netloc, loopback_only));
        if let Some(p) = proxy::proxy_for(url)? {
            check_proxied_target(url)?;
            b = b.proxy(p.proxy);
        }
        Ok(b.build())
    }

    /// The error for a failed `ureq` call to `url` (a status, a refused certificate, a transport
    /// failure, the deadline).
    pub fn error(&self, url: &str, start: Instant, e: ureq::Error) -> OutboundError {
        match e {
            ureq::Error::Status(status, _) => OutboundError::Status { url: url.to_string(), status },
            ureq::Error::Transport(t) => {
                // The resolver's refusal (an address the policy refuses) keeps its name.
                if let Some(r) = refused_in(&t, url) {
                    return r.into();
                }
                match (tls_problem(&t), stalled(&t)) {
                    (Some(problem), _) => OutboundError::Tls { url: url.to_string(), problem },
                    (None, Some(stalled)) => OutboundError::Stalled { url: url.to_string(), stalled },
                    (None, None) if connect_timed_out(&t) => {
                        let ms = connect_timeout().min(self.deadline).as_millis();
                        let message = format!("no connection within {ms} ms");
                        OutboundError::Transport { url: url.to_string(), message }
                    }
                    (None, None) => self.transport(url, start, t.to_string()),
                }
            }
        }
    }

    /// A request to `url` after the rule: the caller sends it (POST bodies, headers). The
    /// answer's 3xx is returned as it is (not followed).
    pub fn request(&self, method: &str, url: &str) -> Result<ureq::Request, OutboundError> {
        let u = check_url(url)?;
        Ok(self.agent(&u)?.request_url(method, &u))
    }

    /// GETs `url`, following at most [`MAX_OUTBOUND_REDIRECTS`] redirects to the same host, and
    /// reads the body up to the size bound, all within the deadline.
    pub fn get(&self, url: &str, accept: &str) -> Result<Fetched, OutboundError> {
        let (res, shown, start) = self.follow(url, accept)?;
        let (status, content_type) = (res.status(), res.header("content-type").map(str::to_string));
        let body = self.read(&shown, start, res.into_reader())?;
        Ok(Fetched { url: shown, status, content_type, body })
    }

    /// GETs `url` like [`Outbound::get`] and streams the body into `to`; the bytes written.
    pub fn download(&self, url: &str, to: &mut impl std::io::Write) -> Result<u64, OutboundError> {
        let (res, shown, start) = self.follow(url, "*/*")?;
        let n = std::io::copy(&mut res.into_reader().take(self.max_bytes + 1), to)
            .map_err(|e| self.io_error(&shown, start, e))?;
        if n > self.max_bytes {
            return Err(OutboundError::TooLarge { url: shown, limit: self.max_bytes });
        }
        Ok(n)
    }

    /// The first non-redirect answer to a GET of `url` (a 2xx), redirects checked.
    fn follow(&self, url: &str, accept: &str) -> Result<(ureq::Response, String, Instant), OutboundError> {
        let start = Instant::now();
        let mut at = check_url(url)?;
        for _ in 0..=MAX_OUTBOUND_REDIRECTS {
            let shown = redact(at.as_str());
            let left = self
                .deadline
                .checked_sub(start.elapsed())
                .filter(|d| !d.is_zero())
                .ok_or(OutboundError::Deadline { url: shown.clone(), ms: self.deadline.as_millis() })?;
            let res = self.agent(&at)?.request_url("GET", &at).timeout(left).set("Accept", accept).call();
            let res = res.map_err(|e| self.error(&shown, start, e))?;
            if !(300..400).contains(&res.status()) {
                return Ok((res, shown, start));
            }
            let loc = res.header("location").unwrap_or("").to_string();
            let next = at.join(&loc).map_err(|e| UrlRefused::NotUrl { url: redact(&loc), reason: e.to_string() })?;
            check_redirect(&at, &next)?;
            at = next;
        }
        let message = format!("more than {MAX_OUTBOUND_REDIRECTS} redirects");
        Err(OutboundError::Transport { url: redact(url), message })
    }

    /// Reads a body up to the size bound (`start`: when the request began, for the deadline).
    pub fn read(&self, url: &str, start: Instant, r: impl Read) -> Result<Vec<u8>, OutboundError> {
        let mut body = Vec::new();
        r.take(self.max_bytes + 1).read_to_end(&mut body).map_err(|e| self.io_error(url, start, e))?;
        if body.len() as u64 > self.max_bytes {
            return Err(OutboundError::TooLarge { url: url.to_string(), limit: self.max_bytes });
        }
        Ok(body)
    }

    /// A failed read of a body: the read timeout, else a transport failure or the deadline.
    pub fn io_error(&self, url: &str, start: Instant, e: std::io::Error) -> OutboundError {
        match stall::find(&e) {
            Some(stalled) => OutboundError::Stalled { url: url.to_string(), stalled },
            None => self.transport(url, start, e.to_string()),
        }
    }

    pub fn transport(&self, url: &str, start: Instant, message: String) -> OutboundError {
        if start.elapsed() >= self.deadline || message.contains("timed out") {
            return OutboundError::Deadline { url: url.to_string(), ms: self.deadline.as_millis() };
        }
        OutboundError::Transport { url: url.to_string(), message }
    }
}

/// The refused certificate behind a transport error, if that is what it was.
pub fn tls_problem(t: &ureq::Transport) -> Option<CertProblem> {
    use std::error::Error;
    t.source().and_then(tls::classify)
}

/// The read timeout behind a transport error, if that is what it was.
fn stalled(t: &ureq::Transport) -> Option<Stalled> {
    use std::error::Error;
    t.source().and_then(stall::find)
}

/// Whether connecting (TCP, to the server or its proxy) took the whole connect timeout.
fn connect_timed_out(t: &ureq::Transport) -> bool {
    use std::error::Error;
    let timed_out =
        |e: &std::io::Error| matches!(e.kind(), std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock);
    t.kind() == ureq::ErrorKind::ConnectionFailed
        && t.source().and_then(|e| e.downcast_ref::<std::io::Error>()).is_some_and(timed_out)
}
