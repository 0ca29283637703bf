//! The connector side of od's one outbound client ([`crate::net::Outbound`]): every request made
//! for connectors and plugin MCP servers — a provider's token endpoint and API, an MCP server's
//! OAuth discovery and client registration, MCP Streamable HTTP — is built here or by
//! `Outbound` itself, so it passes the URL rule and the address policy (on the URL and on every
//! address it resolves to), od's TLS config (`net/tls.rs`: what is trusted), one deadline and a
//! bounded answer.
//!
//! No redirect is followed (a code, a token or a client secret must not travel elsewhere): a 3xx
//! comes back to the caller as it is, except one from `https://` to `http://`, which is refused by
//! name (`tls-downgrade`) before anything could be sent there.
//!
//! A request that got no answer is [`Unreachable`]: its message names the URL, and its `code`
//! names a refused certificate (`tls-untrusted`, `tls-wrong-host`, `tls-expired`,
//! `tls-certificate`), a refused downgrade (`tls-downgrade`) or no TLS client (`tls-setup`) —
//! the codes the HTTP error envelope carries (502) and the CLI exits 84 with.

use std::time::Instant;

use crate::limits::{MAX_CONNECTOR_RESPONSE_BYTES, OAUTH_HTTP_TIMEOUT};
use crate::net::{redact, Outbound, OutboundError};

/// The code of a redirect from https to http that was refused.
pub const DOWNGRADE: &str = "tls-downgrade";

/// A provider, authorization server or MCP server that gave no answer od accepts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Unreachable {
    /// The URL asked (without userinfo).
    pub url: String,
    /// The stable code of a TLS refusal (a certificate, a downgrade, no TLS client); `None` for
    /// any other failure (transport, deadline, URL rule, size), which the caller names.
    pub code: Option<&'static str>,
    /// What happened, naming the URL.
    pub message: String,
}

/// The bounds of every connector and MCP OAuth request: [`OAUTH_HTTP_TIMEOUT`] for the whole
/// request, [`MAX_CONNECTOR_RESPONSE_BYTES`] for the answer.
pub fn client() -> Outbound {
    Outbound::new(OAUTH_HTTP_TIMEOUT, MAX_CONNECTOR_RESPONSE_BYTES)
}

/// The code of an outbound failure that is a TLS refusal (or od's own TLS/proxy setting), if it
/// is one: [`OutboundError::code`], the one mapping of od's outbound client.
pub fn tls_code(e: &OutboundError) -> Option<&'static str> {
    e.code()
}

/// An outbound failure for `url` as [`Unreachable`].
pub fn named(url: &str, e: OutboundError) -> Unreachable {
    Unreachable { url: redact(url), code: tls_code(&e), message: e.to_string() }
}

/// A request to `url` through `out` (the URL rule first), or why it cannot be sent.
pub fn request(out: &Outbound, method: &str, url: &str) -> Result<ureq::Request, Unreachable> {
    out.request(method, url).map_err(|e| named(url, e))
}

/// The answer to a request sent at `start`: any status (an error status is an answer the caller
/// reads), a transport failure or refused certificate named, a downgrade refused.
pub fn answer(
    out: &Outbound,
    url: &str,
    start: Instant,
    sent: Result<ureq::Response, ureq::Error>,
) -> Result<ureq::Response, Unreachable> {
    let res = match sent {
        Ok(r) | Err(ureq::Error::Status(_, r)) => r,
        Err(e) => return Err(named(url, out.error(&redact(url), start, e))),
    };
    refuse_downgrade(url, &res)?;
    Ok(res)
}

/// A 3xx from `url` (https) whose `Location` is not https: refused, naming both (it is never
/// followed, and saying so beats a parse error about the 3xx's body).
pub fn refuse_downgrade(url: &str, res: &ureq::Response) -> Result<(), Unreachable> {
    if !(300..400).contains(&res.status()) {
        return Ok(());
    }
    let Some(loc) = res.header("location") else { return Ok(()) };
    let Ok(from) = url::Url::parse(url) else { return Ok(()) };
    let Ok(to) = from.join(loc) else { return Ok(()) };
    if !crate::net::url_rule::is_downgrade(&from, &to) {
        return Ok(());
    }
    let (from, to) = (redact(url), redact(to.as_str()));
    let message = format!(
        "{from} redirected to {to}: a redirect from https to plain http is refused ({DOWNGRADE}); nothing was sent there"
    );
    Err(Unreachable { url: from, code: Some(DOWNGRADE), message })
}

/// Reads an answer's body up to the client's bound.
pub fn read(out: &Outbound, url: &str, start: Instant, res: ureq::Response) -> Result<Vec<u8>, OutboundError> {
    out.read(&redact(url), start, res.into_reader())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::tls::CertProblem;
    use crate::net::UrlRefused;

    #[test]
    fn tls_refusals_are_named_and_others_left_to_the_caller() {
        let tls = OutboundError::Tls { url: "https://x.example/t".into(), problem: CertProblem::Untrusted };
        let u = named("https://x.example/t", tls);
        assert_eq!((u.code, u.url.as_str()), (Some("tls-untrusted"), "https://x.example/t"));
        assert!(u.message.contains("https://x.example/t") && u.message.contains("trusted"), "{u}");
        let down = UrlRefused::Downgrade { from: "https://a.example/t".into(), to: "http://a.example/t".into() };
        assert_eq!(tls_code(&OutboundError::Refused(down)), Some(DOWNGRADE));
        let same = UrlRefused::Redirect { from: "https://a.example/t".into(), to: "https://b.example/t".into() };
        assert_eq!(tls_code(&OutboundError::Refused(same)), None);
        let other = OutboundError::Transport { url: "https://x.example".into(), message: "refused".into() };
        assert_eq!(named("https://u:p@x.example/", other).url, "https://x.example/");
        let down = |a: &str, b: &str| {
            crate::net::url_rule::is_downgrade(&url::Url::parse(a).unwrap(), &url::Url::parse(b).unwrap())
        };
        assert!(down("HTTPS://a/", "http://a/") && !down("http://a/", "http://b/"));
    }
}
