//! The address policy: every range in both exposures, IPv4 inside IPv6, odd IPv4 spellings through
//! the URL rule, allow/deny precedence, malformed entries, and the resolver's refusal.

use super::*;
use crate::net::url_rule::{check_url, refused_in, resolve_checked};
use crate::net::UrlRefused;

fn pol(exposure: Exposure, allow: &str, deny: &str) -> Policy {
    Policy::new(exposure, Lists::parse(allow, deny).unwrap())
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

const NEVER: &[&str] = &[
    "169.254.169.254",
    "100.100.100.200",
    "fd00:ec2::254",
    "169.254.0.1",
    "169.254.255.255",
    "fe80::1",
    "febf::1",
    "0.0.0.0",
    "0.1.2.3",
    "::",
    "255.255.255.255",
    "224.0.0.1",
    "239.255.255.250",
    "ff02::1",
    "::ffff:169.254.169.254",
    "::169.254.169.254",
    "64:ff9b::a9fe:a9fe",
    "::ffff:0.0.0.0",
    "::ffff:224.0.0.1",
];
const LOCAL: &[&str] = &[
    "127.0.0.1",
    "127.255.0.9",
    "::1",
    "::ffff:127.0.0.1",
    "10.0.0.1",
    "10.255.255.255",
    "172.16.0.1",
    "172.31.255.255",
    "192.168.1.1",
    "100.64.0.1",
    "100.127.255.255",
    "fc00::1",
    "fd12:3456::1",
    "fec0::1",
    "::ffff:10.1.2.3",
    "::ffff:192.168.0.1",
];
const PUBLIC: &[&str] = &[
    "1.1.1.1",
    "8.8.8.8",
    "172.15.255.255",
    "172.32.0.0",
    "100.63.255.255",
    "100.128.0.0",
    "169.253.255.255",
    "2606:4700::1111",
    "fe00::1",
    "::ffff:8.8.8.8",
];

#[test]
fn every_range_in_both_exposures() {
    let (open, hosted) = (pol(Exposure::Loopback, "", ""), pol(Exposure::Hosted, "", ""));
    for a in NEVER {
        for p in [&open, &hosted] {
            let r = p.check_addr(None, ip(a)).expect_err(a);
            assert!(r.rule.contains("always refused") && r.rule.contains("OD_OUTBOUND_ALLOW"), "{a}: {r:?}");
        }
    }
    for a in LOCAL {
        assert_eq!(open.check_addr(None, ip(a)), Ok(()), "{a} on a loopback daemon");
        let r = hosted.check_addr(Some("x.example"), ip(a)).expect_err(a);
        assert!(r.rule.contains("hosted") && r.rule.contains("OD_OUTBOUND_ALLOW"), "{a}: {r:?}");
    }
    for a in PUBLIC {
        assert_eq!(open.check_addr(None, ip(a)), Ok(()), "{a}");
        assert_eq!(hosted.check_addr(None, ip(a)), Ok(()), "{a}");
    }
    let r = open.check_addr(None, ip("::ffff:169.254.169.254")).unwrap_err();
    assert!(r.addr.contains("169.254.169.254") && r.rule.starts_with("a cloud metadata endpoint"), "{r:?}");
    for name in ["metadata.google.internal", "METADATA.Google.Internal.", "metadata"] {
        let r = open.check_name(name).expect_err(name);
        assert!(r.rule.contains("cloud metadata"), "{r:?}");
    }
    assert_eq!(open.check_name("metadata.example.com"), Ok(()));
}

#[test]
fn odd_ipv4_spellings_and_v6_forms_land_in_the_same_check() {
    // The URL parser normalises these to 169.254.169.254 before the policy sees them.
    for url in [
        "https://169.254.169.254/latest/meta-data",
        "http://169.254.169.254/latest/meta-data",
        "https://2852039166/",
        "https://0xa9fea9fe/",
        "https://0xA9.0xFE.0xA9.0xFE/",
        "https://0251.0376.0251.0376/",
        "https://169.254.43518/",
        "https://[::ffff:169.254.169.254]/",
        "https://[::ffff:a9fe:a9fe]/",
        "https://[64:ff9b::169.254.169.254]/",
        "https://[fd00:ec2::254]/",
        "https://metadata.google.internal/computeMetadata/v1/",
        "https://metadata/",
        "https://100.100.100.200/latest/meta-data",
        "https://0.0.0.0/",
        "https://[::]/",
    ] {
        let e = with_policy(pol(Exposure::Loopback, "", ""), || check_url(url)).expect_err(url);
        assert!(matches!(&e, UrlRefused::Blocked { .. }), "{url}: {e:?}");
        let msg = e.to_string();
        assert!(msg.contains("is refused") && msg.contains("OD_OUTBOUND_ALLOW"), "{url}: {msg}");
    }
    let e = with_policy(pol(Exposure::Loopback, "", ""), || check_url("https://2852039166/x")).unwrap_err();
    assert_eq!(
        e,
        UrlRefused::Blocked {
            url: "https://2852039166/x".into(),
            addr: "169.254.169.254".into(),
            rule: "a cloud metadata endpoint, always refused (only an exact OD_OUTBOUND_ALLOW entry `169.254.169.254` allows it)".into()
        }
    );
}

#[test]
fn hosted_refuses_loopback_and_private_literals_that_loopback_mode_allows() {
    for url in
        ["http://127.0.0.1:9/x", "http://[::1]:9/x", "http://localhost:9/x", "https://10.1.2.3/", "https://[fd00::1]/"]
    {
        assert!(with_policy(pol(Exposure::Loopback, "", ""), || check_url(url)).is_ok(), "{url}");
        let e = with_policy(pol(Exposure::Hosted, "", ""), || check_url(url)).expect_err(url);
        assert!(matches!(&e, UrlRefused::Blocked { rule, .. } if rule.contains("hosted")), "{url}: {e}");
        // An allow entry (the address, its network, or the name) lets the hosted daemon reach it.
        for allow in ["127.0.0.1,::1,10.1.2.3,fd00::1", "127.0.0.0/8,::1/128,10.0.0.0/8,fc00::/7"] {
            assert!(with_policy(pol(Exposure::Hosted, allow, ""), || check_url(url)).is_ok(), "{url} with {allow}");
        }
    }
    // The resolver holds every address a name resolves to to the same rule.
    let hosted = pol(Exposure::Hosted, "", "");
    let e = with_policy(hosted.clone(), || resolve_checked("localhost:9", false)).unwrap_err();
    let r = refused_in(&e, "https://localhost:9/").expect("a named refusal");
    assert!(
        matches!(&r, UrlRefused::Blocked { url, rule, .. } if url == "https://localhost:9/" && rule.contains("hosted")),
        "{r:?}"
    );
    assert!(with_policy(pol(Exposure::Hosted, "localhost", ""), || resolve_checked("localhost:9", false)).is_ok());
    assert!(with_policy(pol(Exposure::Loopback, "", ""), || resolve_checked("localhost:9", false)).is_ok());
}

#[test]
fn deny_beats_allow_beats_the_default_and_metadata_needs_an_exact_entry() {
    let open = Exposure::Loopback;
    // Deny beats allow, by address, by network, by name and by suffix.
    let p = pol(open, "127.0.0.1,mcp.corp.example", "127.0.0.0/8,*.corp.example");
    assert!(p.check_addr(None, ip("127.0.0.1")).unwrap_err().rule.contains("OD_OUTBOUND_DENY entry `127.0.0.0/8`"));
    assert!(p.check_addr(None, ip("::ffff:127.0.0.1")).is_err(), "a mapped address is denied like its IPv4");
    assert!(p.check_name("mcp.corp.example").unwrap_err().rule.contains("`*.corp.example`"));
    assert!(p.check_addr(Some("mcp.corp.example"), ip("8.8.8.8")).is_err());
    assert_eq!(p.check_name("corp.example"), Ok(()), "*.suffix matches names below it only");
    assert_eq!(p.check_name("evilcorp.example"), Ok(()));
    // A deny entry refuses a public address the default allows.
    assert!(pol(open, "", "8.8.8.0/24").check_addr(None, ip("8.8.8.8")).is_err());
    assert!(pol(open, "", "2606:4700::/32").check_addr(None, ip("2606:4700::1111")).is_err());
    // Allow beats the hosted default, by suffix too.
    let h = pol(Exposure::Hosted, "*.corp.example", "");
    assert_eq!(h.check_addr(Some("mcp.corp.example"), ip("10.0.0.5")), Ok(()));
    assert!(h.check_addr(Some("other.example"), ip("10.0.0.5")).is_err());
    // Metadata and link-local: only an exact address entry (a metadata name: an exact name entry).
    for allow in ["169.254.0.0/16", "0.0.0.0/0", "*.google.internal", "::ffff:169.254.169.254/128"] {
        let p = pol(open, allow, "");
        assert!(p.check_addr(None, ip("169.254.169.254")).is_err(), "{allow}");
        assert!(p.check_name("metadata.google.internal").is_err(), "{allow}");
    }
    let p = pol(open, "169.254.169.254,metadata.google.internal", "");
    assert_eq!(p.check_addr(None, ip("169.254.169.254")), Ok(()));
    assert_eq!(p.check_addr(None, ip("::ffff:169.254.169.254")), Ok(()));
    assert_eq!(p.check_name("metadata.google.internal"), Ok(()));
    assert!(p.check_addr(None, ip("169.254.1.1")).is_err(), "only that address");
    // ... and a deny entry still beats it.
    let p = pol(open, "169.254.169.254", "169.254.169.254");
    assert!(p.check_addr(None, ip("169.254.169.254")).unwrap_err().rule.contains("OD_OUTBOUND_DENY"));
}

#[test]
fn malformed_entries_name_the_variable_and_the_entry() {
    for (allow, deny, var, entry) in [
        ("10.0.0.0/33", "", ALLOW_VAR, "10.0.0.0/33"),
        ("", "fe80::/129", DENY_VAR, "fe80::/129"),
        ("", "10.0.0.0/x", DENY_VAR, "10.0.0.0/x"),
        ("", "nonsense/8", DENY_VAR, "nonsense/8"),
        ("2852039166", "", ALLOW_VAR, "2852039166"),
        ("0xa9fea9fe", "", ALLOW_VAR, "0xa9fea9fe"),
        ("ok.example, 10.1", "", ALLOW_VAR, " 10.1"),
        ("", "http://evil.example", DENY_VAR, "http://evil.example"),
        ("", "evil.example:443", DENY_VAR, "evil.example:443"),
        ("", "*", DENY_VAR, "*"),
        ("", "*.", DENY_VAR, "*."),
        ("", "a..b", DENY_VAR, "a..b"),
        ("", "ev il.example", DENY_VAR, "ev il.example"),
        ("", "*.*.example", DENY_VAR, "*.*.example"),
    ] {
        let e = Lists::parse(allow, deny).expect_err(entry);
        assert_eq!((e.var, e.entry.as_str()), (var, entry), "{e}");
        assert!(e.to_string().starts_with(var) && e.to_string().contains(entry.trim()), "{e}");
    }
    let many = vec!["10.0.0.1"; MAX_OUTBOUND_LIST_ENTRIES + 1].join(",");
    let e = Lists::parse(&many, "").unwrap_err();
    assert!(e.reason.contains(&MAX_OUTBOUND_LIST_ENTRIES.to_string()), "{e}");
    // Blank entries are skipped; IPs, CIDRs (host bits cleared), names and suffixes parse.
    let l = Lists::parse(" 10.0.0.1/8 , ,[::1],::ffff:1.2.3.4, Mcp.Example., *.corp.example", "").unwrap();
    assert_eq!(
        l.allow,
        vec![
            Entry::Net(ip("10.0.0.0"), 8),
            Entry::Ip(ip("::1")),
            Entry::Ip(ip("1.2.3.4")),
            Entry::Host("mcp.example".into()),
            Entry::Suffix("corp.example".into()),
        ]
    );
    // Lists that never parsed refuse everything rather than fail open.
    let broken = Policy { broken: Lists::parse("", "a..b").err(), ..pol(Exposure::Loopback, "", "") };
    assert!(broken.check_addr(None, ip("8.8.8.8")).unwrap_err().rule.contains("malformed"));
}

#[test]
fn a_refusal_at_connect_time_keeps_its_name_through_the_client() {
    // The agent od builds for a URL resolves every later connection through the checked
    // resolver: a name that passed (or was never shown to) `check_url` is refused when it
    // resolves, and the transport's error still carries the named refusal.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let agent = crate::net::Outbound::new(std::time::Duration::from_secs(5), 1024)
        .agent(&url::Url::parse("https://example.com/").unwrap())
        .expect("a TLS client");
    let url = format!("http://localhost:{port}/x");
    let err = with_policy(pol(Exposure::Hosted, "", ""), || agent.get(&url).call().map_err(Box::new)).unwrap_err();
    let r = refused_in(&*err, &url).unwrap_or_else(|| panic!("no refusal in {err}"));
    assert!(
        matches!(&r, UrlRefused::Blocked { url: u, addr, rule } if u == &url && (addr.contains("127.0.0.1") || addr.contains("::1")) && rule.contains("hosted")),
        "{r:?}"
    );
    assert!(err.to_string().contains("is refused"), "{err}");
    // The same agent in loopback mode connects.
    let served = std::thread::spawn(move || l.accept().is_ok());
    let got = with_policy(pol(Exposure::Loopback, "", ""), || {
        agent.get(&url).timeout(std::time::Duration::from_millis(300)).call().map_err(Box::new)
    });
    assert!(served.join().unwrap(), "no connection: {got:?}");
}

#[test]
fn check_target_resolves_and_checks_every_address_for_a_proxied_request() {
    use crate::net::check_target;
    let open = pol(Exposure::Loopback, "", "");
    assert!(with_policy(open.clone(), || check_target("https://localhost:9/")).is_ok());
    assert!(with_policy(open.clone(), || check_target("https://[::ffff:169.254.169.254]/")).is_err());
    let e = with_policy(pol(Exposure::Hosted, "", ""), || check_target("https://localhost:9/")).unwrap_err();
    assert!(e.is_blocked(), "{e:?}");
    let e = with_policy(pol(Exposure::Loopback, "", "127.0.0.0/8,::1"), || check_target("https://localhost:9/"))
        .unwrap_err();
    assert!(matches!(&e, UrlRefused::Blocked { rule, .. } if rule.contains("OD_OUTBOUND_DENY")), "{e:?}");
}
