//! The outbound HTTP client: every request passes [`super::url_rule`] first, every address a host
//! resolves to is checked again (od's own listeners refused, plain http only to loopback), a
//! redirect is followed only to the same host (and checked again), the whole request — redirects
//! and body included — stops at one deadline, and a body is read up to a size bound.
//!
//! The transport is ureq with rustls, configured by [`super::tls`] (what is trusted); a refused
//! certificate is [`OutboundError::Tls`], naming the URL and the problem.

use std::io::Read;
use std::time::{Duration, Instant};
use url::Url;

use super::tls::{self, CertProblem, TlsSetupError};
use super::url_rule::{check_redirect, check_url, redact, refused_in, resolve_checked, UrlRefused};
use crate::limits::{MAX_OUTBOUND_REDIRECTS, OUTBOUND_TIMEOUT_MS};

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
    /// Connecting, sending or reading failed.
    #[error("{url}: {message}")]
    Transport { url: String, message: String },
}

/// The deadline outbound fetches get unless their caller has its own: `OD_OUTBOUND_TIMEOUT_MS`,
/// else [`OUTBOUND_TIMEOUT_MS`].
pub fn default_deadline() -> Duration {
    let ms = std::env::var("OD_OUTBOUND_TIMEOUT_MS").ok().and_then(|v| v.parse().ok()).filter(|v| *v > 0);
    Duration::from_millis(ms.unwrap_or(OUTBOUND_TIMEOUT_MS))
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

    /// An agent for `url` (already checked): od's TLS config, the checked resolver, no redirects
    /// of its own, no proxy, the deadline as ureq's overall timeout.
    pub fn agent(&self, url: &Url) -> Result<ureq::Agent, OutboundError> {
        let loopback_only = url.scheme() == "http";
        Ok(ureq::AgentBuilder::new()
            .tls_config(tls::client_config()?)
            .timeout(self.deadline)
            .redirects(0)
            .resolver(move |netloc: &str| resolve_checked(netloc, loopback_only))
            .build())
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
                match tls_problem(&t) {
                    Some(problem) => OutboundError::Tls { url: url.to_string(), problem },
                    None => self.transport(url, start, t.to_string()),
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
            .map_err(|e| self.transport(&shown, start, e.to_string()))?;
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
        r.take(self.max_bytes + 1).read_to_end(&mut body).map_err(|e| self.transport(url, start, e.to_string()))?;
        if body.len() as u64 > self.max_bytes {
            return Err(OutboundError::TooLarge { url: url.to_string(), limit: self.max_bytes });
        }
        Ok(body)
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
