//! The address policy of outbound requests: which addresses and host names od connects to for a
//! URL it did not write itself. It is applied to every literal IP in a URL and to EVERY address a
//! host name resolves to (all must pass: a name with one bad address is refused whole).
//!
//! | class | default |
//! |---|---|
//! | cloud metadata (169.254.169.254, fd00:ec2::254, 100.100.100.200; names `metadata.google.internal`, `metadata`) | always refused |
//! | link-local (169.254.0.0/16, fe80::/10), unspecified (0.0.0.0/8, ::), multicast, broadcast | always refused |
//! | loopback (127.0.0.0/8, ::1), private (10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7, fec0::/10) | allowed when od listens on loopback only; refused on a hosted daemon |
//! | anything else | allowed |
//!
//! An IPv6 address that embeds an IPv4 one (`::ffff:a.b.c.d`, `::a.b.c.d`, NAT64 `64:ff9b::/96`)
//! is judged as that IPv4 address. Odd IPv4 spellings (`2852039166`, `0xa9fea9fe`) reach here
//! already normalised by the URL parser.
//!
//! The operator's lists (`OD_OUTBOUND_ALLOW`, `OD_OUTBOUND_DENY`: IPs, CIDRs, host names,
//! `*.suffix`) come first: a deny entry beats an allow entry beats the default. An always-refused
//! address is allowed only by an allow entry that is exactly that address (a metadata name: exactly
//! that name), never by a CIDR or a suffix.
//!
//! Whether the daemon is hosted is told by the daemon when it binds ([`note_listener`]); the
//! lists are installed at start ([`install`]); a malformed entry is a start-up error.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use crate::limits::MAX_OUTBOUND_LIST_ENTRIES;

/// The variable of the allow list.
pub const ALLOW_VAR: &str = "OD_OUTBOUND_ALLOW";
/// The variable of the deny list.
pub const DENY_VAR: &str = "OD_OUTBOUND_DENY";

/// Host names of cloud metadata services (refused like their addresses).
const METADATA_NAMES: &[&str] = &["metadata.google.internal", "metadata"];

/// Who can send this daemon requests, which decides the default for loopback and private
/// addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exposure {
    /// Every listener is on loopback (or od runs embedded in the CLI): whoever sends requests is
    /// this machine's user, who reaches loopback and the private network anyway.
    Loopback,
    /// A listener on a non-loopback address: a remote user must not pivot into the host's network.
    Hosted,
}

/// One entry of an allow or deny list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// One address (IPv4-mapped IPv6 written as its IPv4 address).
    Ip(IpAddr),
    /// A network: its first address (host bits cleared) and prefix length.
    Net(IpAddr, u8),
    /// A host name (lowercase, no trailing dot).
    Host(String),
    /// `*.suffix`: any name below `suffix` (not `suffix` itself).
    Suffix(String),
}

/// A malformed list entry (a start-up error naming the variable and the entry).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{var}: {entry:?} is not an IP address, a CIDR (10.0.0.0/8), a host name or *.suffix: {reason}")]
pub struct ListError {
    pub var: &'static str,
    pub entry: String,
    pub reason: String,
}

/// The operator's allow and deny lists.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Lists {
    pub allow: Vec<Entry>,
    pub deny: Vec<Entry>,
}

/// Why an address or a name is refused: what was refused, and the rule (with how to allow it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub addr: String,
    pub rule: String,
}

/// The policy in force: the exposure and the lists.
#[derive(Clone, Debug)]
pub struct Policy {
    pub exposure: Exposure,
    pub lists: Arc<Lists>,
    /// The lists could not be read (malformed and never installed): everything is refused.
    pub broken: Option<ListError>,
}

/// What an address is, before the lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Public,
    Loopback,
    Private,
    /// Refused whatever the exposure; the reason.
    Never(&'static str),
}

/// The IPv4 address an IPv6 address stands for (mapped, compatible, NAT64), else `ip` itself.
pub fn canonical(ip: IpAddr) -> IpAddr {
    let IpAddr::V6(v6) = ip else { return ip };
    if let Some(v4) = v6.to_ipv4_mapped() {
        return v4.into();
    }
    let s = v6.segments();
    if s[..6] == [0; 6] && !v6.is_unspecified() && !v6.is_loopback() {
        return Ipv4Addr::from((u32::from(s[6]) << 16) | u32::from(s[7])).into();
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return Ipv4Addr::from((u32::from(s[6]) << 16) | u32::from(s[7])).into();
    }
    ip
}

fn in_v4(ip: Ipv4Addr, net: [u8; 4], prefix: u32) -> bool {
    let mask = if prefix == 0 { 0 } else { u32::MAX << (32 - prefix) };
    (u32::from(ip) & mask) == (u32::from(Ipv4Addr::from(net)) & mask)
}

fn in_v6(ip: Ipv6Addr, net: Ipv6Addr, prefix: u32) -> bool {
    let mask = if prefix == 0 { 0 } else { u128::MAX << (128 - prefix) };
    (u128::from(ip) & mask) == (u128::from(net) & mask)
}

fn classify(ip: IpAddr) -> Class {
    match canonical(ip) {
        IpAddr::V4(v4) => {
            let metadata = [Ipv4Addr::new(169, 254, 169, 254), Ipv4Addr::new(100, 100, 100, 200)];
            if metadata.contains(&v4) {
                Class::Never("a cloud metadata endpoint")
            } else if in_v4(v4, [169, 254, 0, 0], 16) {
                Class::Never("link-local (169.254.0.0/16)")
            } else if in_v4(v4, [0, 0, 0, 0], 8) {
                Class::Never("unspecified (0.0.0.0/8)")
            } else if v4.is_broadcast() {
                Class::Never("broadcast")
            } else if v4.is_multicast() {
                Class::Never("multicast (224.0.0.0/4)")
            } else if v4.is_loopback() {
                Class::Loopback
            } else if [([10, 0, 0, 0], 8), ([172, 16, 0, 0], 12), ([192, 168, 0, 0], 16), ([100, 64, 0, 0], 10)]
                .iter()
                .any(|(n, p)| in_v4(v4, *n, *p))
            {
                Class::Private
            } else {
                Class::Public
            }
        }
        IpAddr::V6(v6) => {
            if v6 == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
                Class::Never("a cloud metadata endpoint")
            } else if v6.is_unspecified() {
                Class::Never("unspecified (::)")
            } else if in_v6(v6, Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0), 10) {
                Class::Never("link-local (fe80::/10)")
            } else if v6.is_multicast() {
                Class::Never("multicast (ff00::/8)")
            } else if v6.is_loopback() {
                Class::Loopback
            } else if in_v6(v6, Ipv6Addr::new(0xfc00, 0, 0, 0, 0, 0, 0, 0), 7)
                || in_v6(v6, Ipv6Addr::new(0xfec0, 0, 0, 0, 0, 0, 0, 0), 10)
            {
                Class::Private
            } else {
                Class::Public
            }
        }
    }
}

/// A host name as compared: lowercase, without a trailing dot.
fn norm_name(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
}

impl Entry {
    /// Parses one entry of `var`.
    pub fn parse(var: &'static str, raw: &str) -> Result<Entry, ListError> {
        let bad = |reason: &str| ListError { var, entry: raw.to_string(), reason: reason.to_string() };
        let s = raw.trim();
        if let Some((addr, prefix)) = s.split_once('/') {
            let ip: IpAddr =
                addr.trim_matches(['[', ']']).parse().map_err(|_| bad("the part before / is not an IP address"))?;
            let max = if ip.is_ipv4() { 32 } else { 128 };
            let p: u8 = prefix
                .parse()
                .ok()
                .filter(|p| u32::from(*p) <= max)
                .ok_or_else(|| bad("the prefix length is not 0..=32 (IPv4) or 0..=128 (IPv6)"))?;
            let first = match ip {
                IpAddr::V4(v4) => {
                    let mask = if p == 0 { 0 } else { u32::MAX << (32 - u32::from(p)) };
                    IpAddr::V4(Ipv4Addr::from(u32::from(v4) & mask))
                }
                IpAddr::V6(v6) => {
                    let mask = if p == 0 { 0 } else { u128::MAX << (128 - u32::from(p)) };
                    IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask))
                }
            };
            return Ok(Entry::Net(first, p));
        }
        if let Ok(ip) = s.trim_matches(['[', ']']).parse::<IpAddr>() {
            return Ok(Entry::Ip(canonical(ip)));
        }
        let (suffix, name) = match s.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, s),
        };
        let name = norm_name(name);
        if name.is_empty() || name.len() > 253 {
            return Err(bad("empty, or longer than 253 characters"));
        }
        if name.contains(':') {
            return Err(bad("no ports or schemes: write the host name alone"));
        }
        let label_ok = |l: &str| {
            !l.is_empty() && l.len() <= 63 && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        };
        if !name.split('.').all(label_ok) {
            return Err(bad(
                "a host name is letters, digits, - and _ in dot-separated labels (a * only as a leading *.)",
            ));
        }
        // `2852039166`, `0xa9fea9fe`, `1.2.3`: a URL parser reads these as IPv4 addresses.
        let last = name.rsplit('.').next().unwrap_or("");
        if last.bytes().all(|b| b.is_ascii_digit())
            || (last.starts_with("0x") && last[2..].bytes().all(|b| b.is_ascii_hexdigit()))
        {
            return Err(bad("this is an IPv4 address in an odd spelling: write it as a.b.c.d"));
        }
        Ok(if suffix { Entry::Suffix(name) } else { Entry::Host(name) })
    }

    fn matches_ip(&self, ip: IpAddr) -> bool {
        let c = canonical(ip);
        let one = |e: IpAddr| e == ip || e == c;
        match self {
            Entry::Ip(e) => one(*e),
            Entry::Net(IpAddr::V4(n), p) => {
                [ip, c].iter().any(|a| matches!(a, IpAddr::V4(v4) if in_v4(*v4, n.octets(), u32::from(*p))))
            }
            Entry::Net(IpAddr::V6(n), p) => {
                [ip, c].iter().any(|a| matches!(a, IpAddr::V6(v6) if in_v6(*v6, *n, u32::from(*p))))
            }
            Entry::Host(_) | Entry::Suffix(_) => false,
        }
    }

    fn matches_name(&self, name: &str) -> bool {
        match self {
            Entry::Host(h) => h == name,
            Entry::Suffix(s) => {
                name.len() > s.len() + 1 && name.ends_with(s.as_str()) && name[..name.len() - s.len()].ends_with('.')
            }
            Entry::Ip(_) | Entry::Net(..) => false,
        }
    }

    fn shown(&self) -> String {
        match self {
            Entry::Ip(ip) => ip.to_string(),
            Entry::Net(ip, p) => format!("{ip}/{p}"),
            Entry::Host(h) => h.clone(),
            Entry::Suffix(s) => format!("*.{s}"),
        }
    }
}

impl Lists {
    /// Parses the two lists (comma-separated; blank entries are skipped).
    pub fn parse(allow: &str, deny: &str) -> Result<Lists, ListError> {
        Ok(Lists { allow: parse_list(ALLOW_VAR, allow)?, deny: parse_list(DENY_VAR, deny)? })
    }

    /// The lists from `OD_OUTBOUND_ALLOW` and `OD_OUTBOUND_DENY` (unset: empty).
    pub fn from_env() -> Result<Lists, ListError> {
        let var = |k| std::env::var(k).unwrap_or_default();
        Lists::parse(&var(ALLOW_VAR), &var(DENY_VAR))
    }
}

fn parse_list(var: &'static str, text: &str) -> Result<Vec<Entry>, ListError> {
    let raw: Vec<&str> = text.split(',').filter(|e| !e.trim().is_empty()).collect();
    if raw.len() > MAX_OUTBOUND_LIST_ENTRIES {
        let reason = format!("{} entries, more than {MAX_OUTBOUND_LIST_ENTRIES}", raw.len());
        return Err(ListError { var, entry: text.chars().take(80).collect(), reason });
    }
    raw.into_iter().map(|e| Entry::parse(var, e)).collect()
}

impl Policy {
    /// A policy with `exposure` and `lists` (tests build one directly).
    pub fn new(exposure: Exposure, lists: Lists) -> Policy {
        Policy { exposure, lists: Arc::new(lists), broken: None }
    }

    fn broken(&self, addr: String) -> Result<(), Refusal> {
        match &self.broken {
            Some(e) => Err(Refusal { addr, rule: format!("refused while the lists are malformed ({e})") }),
            None => Ok(()),
        }
    }

    /// Checks a host name before it is resolved: the deny list, then the metadata names.
    pub fn check_name(&self, host: &str) -> Result<(), Refusal> {
        let name = norm_name(host);
        self.broken(name.clone())?;
        if let Some(e) = self.lists.deny.iter().find(|e| e.matches_name(&name)) {
            return Err(Refusal { addr: name, rule: format!("denied by the {DENY_VAR} entry `{}`", e.shown()) });
        }
        if METADATA_NAMES.contains(&name.as_str()) && !self.lists.allow.contains(&Entry::Host(name.clone())) {
            let rule = format!(
                "a cloud metadata endpoint, always refused (only an exact {ALLOW_VAR} entry `{name}` allows it)"
            );
            return Err(Refusal { addr: name, rule });
        }
        Ok(())
    }

    /// Checks one address od would connect to; `host`: the name it was resolved from (for name
    /// entries), `None` for a literal address.
    pub fn check_addr(&self, host: Option<&str>, ip: IpAddr) -> Result<(), Refusal> {
        let c = canonical(ip);
        let addr = if c == ip { ip.to_string() } else { format!("{ip} (= {c})") };
        self.broken(addr.clone())?;
        let name = host.map(norm_name);
        let by_name = |e: &Entry| name.as_deref().is_some_and(|n| e.matches_name(n));
        if let Some(e) = self.lists.deny.iter().find(|e| e.matches_ip(ip) || by_name(e)) {
            return Err(Refusal { addr, rule: format!("denied by the {DENY_VAR} entry `{}`", e.shown()) });
        }
        match classify(ip) {
            Class::Public => Ok(()),
            Class::Never(why) if self.lists.allow.contains(&Entry::Ip(c)) => {
                tracing::debug!("{addr} is {why}, allowed by the exact {ALLOW_VAR} entry");
                Ok(())
            }
            Class::Never(why) => Err(Refusal {
                addr,
                rule: format!("{why}, always refused (only an exact {ALLOW_VAR} entry `{c}` allows it)"),
            }),
            Class::Loopback | Class::Private if self.exposure == Exposure::Loopback => Ok(()),
            Class::Loopback | Class::Private if self.lists.allow.iter().any(|e| e.matches_ip(ip) || by_name(e)) => {
                Ok(())
            }
            class => {
                let what = if class == Class::Loopback { "a loopback address" } else { "a private-network address" };
                let rule = format!(
                    "{what}, refused by default on a daemon that listens beyond loopback (hosted); \
                     allow it with {ALLOW_VAR} (the address, its network, or the host name)"
                );
                Err(Refusal { addr, rule })
            }
        }
    }
}

static HOSTED: AtomicBool = AtomicBool::new(false);
static LISTS: RwLock<Option<Arc<Lists>>> = RwLock::new(None);

/// Called by the daemon for each address it listens on: one non-loopback listener makes this
/// process hosted (for good: a listener that closes does not make it less exposed).
pub fn note_listener(ip: IpAddr) {
    if !ip.is_loopback() {
        HOSTED.store(true, Ordering::SeqCst);
    }
}

/// Installs the operator's lists (the daemon at start, after [`Lists::from_env`]).
pub fn install(lists: Lists) {
    *LISTS.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(lists));
}

thread_local! {
    static SCOPED: std::cell::RefCell<Option<Policy>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` with `policy` in force on this thread instead of the process's (tests inject the
/// exposure and the lists this way, without touching other threads).
pub fn with_policy<T>(policy: Policy, f: impl FnOnce() -> T) -> T {
    let before = SCOPED.with(|s| s.replace(Some(policy)));
    struct Restore(Option<Policy>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let before = self.0.take();
            SCOPED.with(|s| *s.borrow_mut() = before);
        }
    }
    let _restore = Restore(before);
    f()
}

/// The policy in force. Lists never installed are read from the environment; malformed ones then
/// refuse everything (the daemon reports them at start; a library caller must not fail open).
pub fn current() -> Policy {
    if let Some(p) = SCOPED.with(|s| s.borrow().clone()) {
        return p;
    }
    let exposure = if HOSTED.load(Ordering::SeqCst) { Exposure::Hosted } else { Exposure::Loopback };
    if let Some(l) = LISTS.read().unwrap_or_else(|e| e.into_inner()).clone() {
        return Policy { exposure, lists: l, broken: None };
    }
    match Lists::from_env() {
        Ok(l) => Policy::new(exposure, l),
        Err(e) => Policy { exposure, lists: Arc::new(Lists::default()), broken: Some(e) },
    }
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
