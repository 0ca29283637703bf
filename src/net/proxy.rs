//! Which proxy an outbound request goes through, read from the environment the way curl reads it:
//!
//! - `https_proxy` / `HTTPS_PROXY` for an `https://` URL, `http_proxy` / `HTTP_PROXY` for an
//!   `http://` one, else `all_proxy` / `ALL_PROXY` (the lower-case name first, as curl; an empty
//!   value counts as unset). od also honours upper-case `HTTP_PROXY`, which curl ignores for fear
//!   of CGI's `Proxy:` header (httpoxy): od is not a CGI program.
//! - The proxy is an `http://[user:password@]host[:port]` URL (no scheme means http; no port means
//!   1080, curl's default). An https URL goes through it as a CONNECT tunnel, so TLS — and the
//!   certificate check — stays end to end with the origin. Proxy credentials in the URL are the
//!   convention (the one place od accepts a secret in a URL); they go in `Proxy-Authorization` and
//!   are never printed: every message shows the URL without them.
//! - `no_proxy` / `NO_PROXY` (curl's rule): a comma list; `*` alone matches every host; a name
//!   matches itself and every name under it (`example.com` and `.example.com` both match
//!   `example.com` and `a.example.com`, not `notexample.com`), ignoring case and a trailing dot; an
//!   IP address matches itself, with `/bits` a CIDR range; IPv6 without brackets. As in curl,
//!   loopback is **not** bypassed by itself: `localhost` and `127.0.0.1` go through the proxy
//!   unless NO_PROXY lists them (plain http, which od allows to loopback only, then needs a proxy
//!   on loopback: the resolver refuses any other address for it, see [`super::url_rule`]).
//!
//! A malformed variable is an error naming it ([`ProxyError`]), never a silent direct connection.

use std::net::IpAddr;
use url::{Host, Url};

use super::url_rule::redact;

/// A proxy variable that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{var}={shown}: {reason}")]
pub struct ProxyError {
    /// The variable's name (`HTTPS_PROXY`, `http_proxy`, ...).
    pub var: &'static str,
    /// Its value without credentials.
    pub shown: String,
    pub reason: String,
}

/// The proxy chosen for one URL (its `Debug` leaves the credentials out).
#[derive(Clone)]
pub struct Chosen {
    /// The variable it came from.
    pub var: &'static str,
    /// `http://host:port`, without credentials (for messages).
    pub shown: String,
    pub proxy: ureq::Proxy,
}

impl std::fmt::Debug for Chosen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chosen").field("var", &self.var).field("shown", &self.shown).finish_non_exhaustive()
    }
}

const NO_PROXY: [&str; 2] = ["no_proxy", "NO_PROXY"];
const ALL: [&str; 2] = ["all_proxy", "ALL_PROXY"];

/// The proxy for `url` from the process environment; `None` for a direct connection.
pub fn proxy_for(url: &Url) -> Result<Option<Chosen>, ProxyError> {
    choose(url, |k| std::env::var(k).ok())
}

/// [`proxy_for`] with the variables read through `var` (tests pass a map).
pub fn choose(url: &Url, var: impl Fn(&str) -> Option<String>) -> Result<Option<Chosen>, ProxyError> {
    let scheme: [&'static str; 2] = match url.scheme() {
        "https" => ["https_proxy", "HTTPS_PROXY"],
        "http" => ["http_proxy", "HTTP_PROXY"],
        _ => return Ok(None),
    };
    let mut found = None;
    for name in scheme.into_iter().chain(ALL) {
        if let Some(v) = var(name).filter(|v| !v.trim().is_empty()) {
            found = Some((name, v));
            break;
        }
    }
    let Some((name, value)) = found else { return Ok(None) };
    let chosen = parse(name, &value)?;
    let no_proxy = NO_PROXY.iter().find_map(|n| var(n)).unwrap_or_default();
    match url.host() {
        Some(host) if bypass(&no_proxy, &host) => Ok(None),
        _ => Ok(Some(chosen)),
    }
}

/// Parses a proxy variable's value (`name` for the error).
pub fn parse(name: &'static str, value: &str) -> Result<Chosen, ProxyError> {
    let value = value.trim();
    let fail = |reason: &str| ProxyError { var: name, shown: redact(value), reason: reason.to_string() };
    let full = if value.contains("://") { value.to_string() } else { format!("http://{value}") };
    let u = Url::parse(&full).map_err(|e| fail(&format!("not a proxy URL: {e}")))?;
    if u.scheme() != "http" {
        return Err(fail(&format!(
            "only http:// proxies are supported (https is tunnelled through them with CONNECT), not {}://",
            u.scheme()
        )));
    }
    let host = match u.host() {
        Some(Host::Domain(d)) if !d.is_empty() => d.to_string(),
        Some(Host::Ipv4(ip)) => ip.to_string(),
        Some(Host::Ipv6(_)) => return Err(fail("an IPv6 proxy address is not supported; name the proxy by host name")),
        _ => return Err(fail("no host")),
    };
    if !matches!(u.path(), "" | "/") || u.query().is_some() || u.fragment().is_some() {
        return Err(fail("a proxy URL has no path, query or fragment"));
    }
    // `Url` forgets a port equal to the scheme's default (80), so look at what was written.
    let authority = full.split("://").nth(1).unwrap_or("").split('/').next().unwrap_or("");
    let explicit = authority.rsplit('@').next().is_some_and(|hp| hp.contains(':'));
    let port = if explicit { u.port_or_known_default().unwrap_or(80) } else { 1080 };
    let (user, password) = (percent_decode(u.username()), u.password().map(percent_decode));
    if user.contains(':') {
        return Err(fail("the proxy user name may not contain ':'"));
    }
    let auth = match (user.is_empty(), password) {
        (true, None) => String::new(),
        (_, password) => format!("{user}:{}@", password.unwrap_or_default()),
    };
    let proxy = ureq::Proxy::new(format!("http://{auth}{host}:{port}")).map_err(|e| fail(&e.to_string()))?;
    Ok(Chosen { var: name, shown: format!("http://{host}:{port}"), proxy })
}

/// `%XX` escapes decoded (a proxy password may hold `@` or `:` written as `%40`, `%3A`).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let (mut out, mut i) = (Vec::with_capacity(b.len()), 0);
    while i < b.len() {
        let hex =
            b.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok()).and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b[i], hex) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether `host` is in the NO_PROXY list `list` (curl's rule, see the module's doc).
pub fn bypass(list: &str, host: &Host<&str>) -> bool {
    let ip: Option<IpAddr> = match host {
        Host::Ipv4(ip) => Some((*ip).into()),
        Host::Ipv6(ip) => Some((*ip).into()),
        Host::Domain(_) => None,
    };
    list.split(',').map(str::trim).filter(|e| !e.is_empty()).any(|entry| {
        if entry == "*" {
            return true;
        }
        match (ip, host) {
            (Some(ip), _) => ip_matches(entry, ip),
            (None, Host::Domain(name)) => name_matches(entry, name),
            _ => false,
        }
    })
}

fn name_matches(entry: &str, name: &str) -> bool {
    let entry = entry.trim_start_matches('.').trim_end_matches('.').to_ascii_lowercase();
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    !entry.is_empty() && (name == entry || name.ends_with(&format!(".{entry}")))
}

fn ip_matches(entry: &str, ip: IpAddr) -> bool {
    let (addr, bits) = match entry.split_once('/') {
        Some((a, b)) => match b.parse::<u32>() {
            Ok(b) => (a, Some(b)),
            Err(_) => return false,
        },
        None => (entry, None),
    };
    let Ok(net) = addr.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>() else { return false };
    match (net, ip) {
        (IpAddr::V4(n), IpAddr::V4(a)) => prefix_eq(u32::from(n).into(), u32::from(a).into(), 32, bits),
        (IpAddr::V6(n), IpAddr::V6(a)) => prefix_eq(u128::from(n), u128::from(a), 128, bits),
        _ => false,
    }
}

/// Whether the first `bits` (all `width` when `None`) of `a` and `b` agree.
fn prefix_eq(a: u128, b: u128, width: u32, bits: Option<u32>) -> bool {
    let bits = bits.unwrap_or(width);
    if bits > width {
        return false;
    }
    let shift = width - bits;
    shift >= 128 || (a >> shift) == (b >> shift)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn host(s: &str) -> Host<String> {
        Url::parse(&format!("https://{s}/")).unwrap().host().unwrap().to_owned()
    }

    fn no(list: &str, h: &str) -> bool {
        let h = host(h);
        let borrowed = match &h {
            Host::Domain(d) => Host::Domain(d.as_str()),
            Host::Ipv4(ip) => Host::Ipv4(*ip),
            Host::Ipv6(ip) => Host::Ipv6(*ip),
        };
        bypass(list, &borrowed)
    }

    #[test]
    fn no_proxy_matches_as_curl_does() {
        assert!(no("*", "anything.example"));
        assert!(no("example.com", "example.com") && no("example.com", "a.b.EXAMPLE.com"));
        assert!(no(".example.com", "example.com") && no(".example.com", "www.example.com"));
        assert!(!no("example.com", "notexample.com") && !no("example.com", "example.com.org"));
        assert!(no(" other.org , example.com. ", "example.com."));
        assert!(no("10.0.0.0/8", "10.20.30.40") && !no("10.0.0.0/8", "11.0.0.1"));
        assert!(no("192.168.1.7", "192.168.1.7") && !no("192.168.1.7", "192.168.1.8"));
        assert!(no("::1", "[::1]") && no("fd00::/8", "[fd12::1]") && !no("fd00::/8", "[fe80::1]"));
        // Loopback is proxied unless listed (curl's rule), and a name never matches an address.
        assert!(!no("", "localhost") && !no("example.com", "127.0.0.1"));
        assert!(!no("localhost", "127.0.0.1") && no("localhost,127.0.0.1", "127.0.0.1"));
        assert!(!no("10.0.0.0/99", "10.0.0.1") && !no("*.example.com", "a.example.com"));
        assert!(no("0.0.0.0/0", "8.8.8.8"));
    }

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn the_variable_follows_the_scheme() {
        let https = Url::parse("https://api.example.com/x").unwrap();
        let http = Url::parse("http://127.0.0.1:9/x").unwrap();
        let vars = env(&[("HTTPS_PROXY", "http://p.example:3128"), ("http_proxy", "q.example")]);
        let c = choose(&https, &vars).unwrap().unwrap();
        assert_eq!((c.var, c.shown.as_str()), ("HTTPS_PROXY", "http://p.example:3128"));
        let c = choose(&http, &vars).unwrap().unwrap();
        assert_eq!((c.var, c.shown.as_str()), ("http_proxy", "http://q.example:1080"));
        let lower_first = env(&[("https_proxy", "http://a:1"), ("HTTPS_PROXY", "http://b:1")]);
        assert_eq!(choose(&https, lower_first).unwrap().unwrap().shown, "http://a:1");
        let all = env(&[("ALL_PROXY", "http://all.example:80"), ("https_proxy", " ")]);
        assert_eq!(choose(&https, all).unwrap().unwrap().shown, "http://all.example:80");
        assert!(choose(&https, env(&[])).unwrap().is_none());
        let bypassed = env(&[("HTTPS_PROXY", "http://p:1"), ("no_proxy", "example.com")]);
        assert!(choose(&https, bypassed).unwrap().is_none());
    }

    #[test]
    fn a_bad_variable_is_named_and_its_secret_never_shown() {
        let u = Url::parse("https://api.example.com/").unwrap();
        for (value, says) in [
            ("https://p.example:443", "only http://"),
            ("socks5://p.example", "only http://"),
            ("http://p.example:3128/path", "no path"),
            ("http://[::1]:3128", "IPv6"),
            ("http://:3128", "not a proxy URL"),
        ] {
            let e = choose(&u, env(&[("HTTPS_PROXY", value)])).unwrap_err();
            assert_eq!(e.var, "HTTPS_PROXY");
            assert!(e.to_string().starts_with("HTTPS_PROXY=") && e.reason.contains(says), "{value}: {e}");
        }
        let e = choose(&u, env(&[("HTTPS_PROXY", "https://me:s3cret@p.example")])).unwrap_err();
        assert!(!e.to_string().contains("s3cret"), "{e}");
        let ok = choose(&u, env(&[("HTTPS_PROXY", "http://me:s%40cret@p.example:8080")])).unwrap().unwrap();
        assert_eq!(ok.shown, "http://p.example:8080");
        assert!(!format!("{ok:?}").contains("cret"), "{ok:?}");
        assert_eq!(percent_decode("s%40cret%3a%zz"), "s@cret:%zz");
    }
}
