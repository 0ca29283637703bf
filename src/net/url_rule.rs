//! The URL rule of every outbound request: a URL od did not write itself (a plugin's MCP `url`, an
//! OAuth server's metadata, a marketplace index or archive, a `connectors.json` endpoint) must
//! parse as a URL, be `https://` (or `http://` to a loopback host only: a provider on this
//! machine), carry no userinfo (`user:password@`: a secret in a URL ends up in logs, and
//! `http://localhost:1@evil/` is a way around a host check), and never name one of od's own
//! listeners (its API port, its web port: any port this process listens on). Redirects are
//! followed only to the same host, and the target passes the rule again. Every literal address
//! and host name in a URL, and every address a name resolves to, also passes the address policy
//! ([`super::policy`]: never link-local or cloud metadata; loopback and private ranges by the
//! daemon's exposure; the operator's allow and deny lists).
//!
//! The addresses od listens on are registered here by the daemon when it binds
//! ([`register_own`]); [`is_own_listener`] is checked again for every address a host name
//! resolves to, so a name that resolves to loopback cannot reach the API either.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs, UdpSocket};
use std::sync::Mutex;
use url::{Host, Url};

use super::policy::{self, Refusal};

/// Why an outbound URL is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlRefused {
    /// Not an absolute URL.
    #[error("{url:?} is not a URL: {reason}")]
    NotUrl { url: String, reason: String },
    /// A scheme other than http and https.
    #[error("{url:?}: only https:// (or http:// to a loopback host) is allowed")]
    Scheme { url: String },
    /// `user:password@` in the URL (shown without it).
    #[error("{url:?}: a URL may not carry a user name or password (userinfo); put credentials elsewhere")]
    Userinfo { url: String },
    /// Plain http to a host that is not loopback.
    #[error("{url:?}: plain http:// only to a loopback host (127.0.0.1, [::1], localhost); use https://")]
    PlainHttp { url: String },
    /// The URL (or an address its host resolves to) is one of od's own listeners.
    #[error("{url:?} names od's own API ({addr}); od never sends requests to itself")]
    OwnApi { url: String, addr: String },
    /// A redirect to another host.
    #[error("{from:?} redirected to {to:?}: only redirects to the same host are followed")]
    Redirect { from: String, to: String },
    /// A redirect from https to http: what TLS protected would travel in clear (`tls-downgrade`).
    #[error("{from:?} redirected to {to:?}: a redirect from https:// to http:// is never followed")]
    Downgrade { from: String, to: String },
    /// The address policy refused the URL's host, or an address it resolves to (`rule` says which
    /// rule and how to allow it).
    #[error("{url:?} is refused: {addr} is {rule}")]
    Blocked { url: String, addr: String, rule: String },
}

impl UrlRefused {
    /// The stable error code of every refusal by the URL rule (HTTP 422, CLI exit 2).
    pub const CODE: &'static str = "url-refused";

    /// Whether the address policy refused it (as opposed to the URL's form).
    pub fn is_blocked(&self) -> bool {
        matches!(self, UrlRefused::Blocked { .. })
    }

    fn blocked(url: String, r: Refusal) -> UrlRefused {
        UrlRefused::Blocked { url, addr: r.addr, rule: r.rule }
    }
}

/// The refusal inside an error chain (a resolver's refusal, carried by the transport's error as
/// an `io::Error`), with `url` as the URL it names; `None` when the error is something else.
pub fn refused_in(err: &(dyn std::error::Error + 'static), url: &str) -> Option<UrlRefused> {
    let mut at = Some(err);
    while let Some(e) = at {
        let inner = e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .map(|i| i as &(dyn std::error::Error + 'static));
        for cand in [Some(e), inner].into_iter().flatten() {
            if let Some(r) = cand.downcast_ref::<UrlRefused>() {
                return Some(match r.clone() {
                    UrlRefused::Blocked { addr, rule, .. } => UrlRefused::Blocked { url: url.to_string(), addr, rule },
                    other => other,
                });
            }
        }
        at = e.source();
    }
    None
}

static OWN: Mutex<Vec<SocketAddr>> = Mutex::new(Vec::new());

/// Records an address this process listens on (the API, the web UI's port).
pub fn register_own(addr: SocketAddr) {
    let mut own = OWN.lock().unwrap_or_else(|e| e.into_inner());
    if !own.contains(&addr) {
        own.push(addr);
    }
}

/// Forgets a listener that closed.
pub fn unregister_own(addr: SocketAddr) {
    OWN.lock().unwrap_or_else(|e| e.into_inner()).retain(|a| *a != addr);
}

/// Whether `ip` is an address of this host (loopback, unspecified, or one assigned to an
/// interface: binding a UDP socket to it succeeds only then).
fn is_local(ip: IpAddr) -> bool {
    ip.is_loopback() || ip.is_unspecified() || UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok()
}

/// Whether a connection to `addr` would reach one of od's own listeners.
pub fn is_own_listener(addr: &SocketAddr) -> bool {
    let ports: Vec<u16> = OWN.lock().unwrap_or_else(|e| e.into_inner()).iter().map(SocketAddr::port).collect();
    ports.contains(&addr.port()) && is_local(addr.ip())
}

/// `url` without its userinfo (for messages and logs); the input itself when it does not parse.
pub fn redact(url: &str) -> String {
    match Url::parse(url) {
        Ok(mut u) if !u.username().is_empty() || u.password().is_some() => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.to_string()
        }
        Ok(_) => url.to_string(),
        // Not a URL: still cut anything that looks like `scheme://userinfo@`.
        Err(_) => match (url.find("://"), url.rfind('@')) {
            (Some(s), Some(at)) if at > s => format!("{}{}", &url[..s + 3], &url[at + 1..]),
            _ => url.to_string(),
        },
    }
}

fn loopback_host(h: &Host<&str>) -> bool {
    match h {
        Host::Domain(d) => d.eq_ignore_ascii_case("localhost"),
        Host::Ipv4(ip) => ip.is_loopback(),
        Host::Ipv6(ip) => ip.is_loopback(),
    }
}

/// Checks `url` against the rule; the parsed URL when it passes. A literal address (and
/// `localhost`) is also checked against od's own listeners here; names are checked again when
/// they resolve ([`resolve_checked`]).
pub fn check_url(url: &str) -> Result<Url, UrlRefused> {
    let u = Url::parse(url).map_err(|e| UrlRefused::NotUrl { url: redact(url), reason: e.to_string() })?;
    let shown = || redact(url);
    if !u.username().is_empty() || u.password().is_some() {
        return Err(UrlRefused::Userinfo { url: shown() });
    }
    if !matches!(u.scheme(), "http" | "https") {
        return Err(UrlRefused::Scheme { url: shown() });
    }
    let host = u.host().ok_or_else(|| UrlRefused::NotUrl { url: shown(), reason: "no host".into() })?;
    let port = u.port_or_known_default().unwrap_or(0);
    let literal: Vec<SocketAddr> = match host {
        Host::Ipv4(ip) => vec![SocketAddr::new(ip.into(), port)],
        Host::Ipv6(ip) => vec![SocketAddr::new(ip.into(), port)],
        Host::Domain(d) if d.eq_ignore_ascii_case("localhost") => {
            vec![
                SocketAddr::new([127, 0, 0, 1].into(), port),
                SocketAddr::new(std::net::Ipv6Addr::LOCALHOST.into(), port),
            ]
        }
        Host::Domain(_) => vec![],
    };
    if let Some(a) = literal.iter().find(|a| is_own_listener(a)) {
        return Err(UrlRefused::OwnApi { url: shown(), addr: a.to_string() });
    }
    // The address policy before the scheme's rule: `http://169.254.169.254/` is refused for its
    // address (https would not make it fetchable).
    let p = policy::current();
    let name = match host {
        Host::Domain(d) => {
            p.check_name(d).map_err(|r| UrlRefused::blocked(shown(), r))?;
            Some(d)
        }
        _ => None,
    };
    for a in &literal {
        p.check_addr(name, a.ip()).map_err(|r| UrlRefused::blocked(shown(), r))?;
    }
    match u.scheme() {
        "https" => {}
        "http" if loopback_host(&host) => {}
        "http" => return Err(UrlRefused::PlainHttp { url: shown() }),
        _ => return Err(UrlRefused::Scheme { url: shown() }),
    }
    Ok(u)
}

/// Checks a request's target when the connection goes elsewhere first (through a proxy, which
/// resolves names itself): the rule on `url`, then the host resolved here and every address
/// checked. A name this machine cannot resolve passes (behind a proxy, often only the proxy
/// resolves outside names); the proxy may also resolve a name differently (a name that changes
/// its answers between two lookups). A literal address has neither gap.
pub fn check_target(url: &str) -> Result<Url, UrlRefused> {
    let u = check_url(url)?;
    if let Some(Host::Domain(d)) = u.host() {
        let netloc = format!("{d}:{}", u.port_or_known_default().unwrap_or(0));
        if let Err(e) = resolve_checked(&netloc, false) {
            if let Some(r) = refused_in(&e, &redact(url)) {
                return Err(r);
            }
        }
    }
    Ok(u)
}

/// Whether going from `from` to `to` leaves TLS (https to anything else): `tls-downgrade`.
pub fn is_downgrade(from: &Url, to: &Url) -> bool {
    from.scheme() == "https" && to.scheme() != "https"
}

/// Whether following a redirect from `from` to `to` is allowed: same host and port, no
/// downgrade from https to http, and `to` passes the rule.
pub fn check_redirect(from: &Url, to: &Url) -> Result<(), UrlRefused> {
    let same = from.host_str() == to.host_str() && from.port_or_known_default() == to.port_or_known_default();
    let (f, t) = (|| redact(from.as_str()), || redact(to.as_str()));
    if is_downgrade(from, to) {
        return Err(UrlRefused::Downgrade { from: f(), to: t() });
    }
    if !same {
        return Err(UrlRefused::Redirect { from: f(), to: t() });
    }
    check_url(to.as_str()).map(|_| ())
}

/// Resolves `netloc` (`host:port`) and drops nothing silently: an address that is one of od's
/// own listeners fails the whole lookup; so does one the address policy refuses (the error then
/// carries a [`UrlRefused::Blocked`], see [`refused_in`]); with `loopback_only` (plain http) every
/// address must be loopback.
pub fn resolve_checked(netloc: &str, loopback_only: bool) -> std::io::Result<Vec<SocketAddr>> {
    let denied = |r: Refusal| {
        let url = netloc.to_string();
        std::io::Error::new(std::io::ErrorKind::PermissionDenied, UrlRefused::blocked(url, r))
    };
    let host = netloc.rsplit_once(':').map_or(netloc, |(h, _)| h).trim_matches(['[', ']']);
    let p = policy::current();
    let name = host.parse::<IpAddr>().is_err().then_some(host);
    if let Some(n) = name {
        p.check_name(n).map_err(denied)?;
    }
    let addrs: Vec<SocketAddr> = netloc.to_socket_addrs()?.collect();
    let refuse = |why: String| std::io::Error::new(std::io::ErrorKind::PermissionDenied, why);
    if let Some(a) = addrs.iter().find(|a| is_own_listener(a)) {
        return Err(refuse(format!("{netloc} resolves to {a}, od's own API; od never sends requests to itself")));
    }
    for a in &addrs {
        p.check_addr(name, a.ip()).map_err(denied)?;
    }
    if loopback_only {
        if let Some(a) = addrs.iter().find(|a| !a.ip().is_loopback()) {
            return Err(refuse(format!("{netloc} resolves to {a}, not loopback: plain http only to loopback")));
        }
    }
    Ok(addrs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule() {
        assert!(check_url("https://api.example.com/x").is_ok());
        assert!(check_url("http://127.0.0.1:9/x").is_ok());
        assert!(check_url("http://[::1]:9/x").is_ok());
        assert!(check_url("http://localhost:9/x").is_ok());
        assert!(matches!(check_url("http://localhost:1@evil.example/"), Err(UrlRefused::Userinfo { .. })));
        assert!(
            matches!(check_url("https://u:p@x.example/"), Err(UrlRefused::Userinfo { url }) if !url.contains("p@"))
        );
        assert!(matches!(check_url("http://evil.example/"), Err(UrlRefused::PlainHttp { .. })));
        assert!(matches!(check_url("http://127.0.0.1.evil.example/"), Err(UrlRefused::PlainHttp { .. })));
        assert!(matches!(check_url("file:///etc/passwd"), Err(UrlRefused::Scheme { .. })));
        assert!(matches!(check_url("/relative"), Err(UrlRefused::NotUrl { .. })));
        let own = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        register_own(own);
        let port = own.port();
        for u in [
            format!("http://127.0.0.1:{port}/api/daemon/stop"),
            format!("http://localhost:{port}/"),
            format!("http://127.0.0.2:{port}/"),
            format!("https://0.0.0.0:{port}/"),
        ] {
            assert!(matches!(check_url(&u), Err(UrlRefused::OwnApi { .. })), "{u}");
        }
        assert!(resolve_checked(&format!("localhost:{port}"), true).is_err());
        unregister_own(own);
        assert!(check_url(&format!("http://127.0.0.1:{port}/")).is_ok());
        assert_eq!(redact("http://user:secret@h.example/a"), "http://h.example/a");
        let (a, b) = (Url::parse("http://127.0.0.1:1/a").unwrap(), Url::parse("http://127.0.0.1:1/b").unwrap());
        assert!(check_redirect(&a, &b).is_ok());
        let c = Url::parse("http://localhost:1/b").unwrap();
        assert!(matches!(check_redirect(&a, &c), Err(UrlRefused::Redirect { .. })));
        let s = Url::parse("https://127.0.0.1:1/a").unwrap();
        assert!(matches!(check_redirect(&s, &b), Err(UrlRefused::Downgrade { .. })));
        assert!(matches!(check_redirect(&s, &c), Err(UrlRefused::Downgrade { .. })));
    }
}
