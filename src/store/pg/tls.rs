//! TLS to PostgreSQL with libpq's meanings of `sslmode` and `sslrootcert`: which mode a URL asks
//! for (its query parameters, read here because tokio-postgres knows only three modes and rejects
//! the rest), which roots it trusts, and the rustls connector (ring provider) that checks what the
//! mode says and names why a handshake failed. `conn.rs` drives the connections and libpq's
//! fallbacks between TLS and plain.
//!
//! | sslmode     | TLS                                   | checks                                  |
//! |-------------|---------------------------------------|-----------------------------------------|
//! | disable     | never                                 | nothing                                 |
//! | allow       | only if the server refuses plain      | nothing (chain if roots are given)      |
//! | prefer      | if the server offers it (the default) | nothing (chain if roots are given)      |
//! | require     | always                                | nothing, or the chain if roots are given|
//! | verify-ca   | always                                | the chain, against `sslrootcert`        |
//! | verify-full | always                                | the chain and the host name             |

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect};
use tokio_postgres::Socket;

/// libpq's `sslmode` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Allow,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    pub fn parse(s: &str) -> Result<Self, String> {
        Ok(match s {
            "disable" => SslMode::Disable,
            "allow" => SslMode::Allow,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            other => {
                return Err(format!("{other:?}: use disable, allow, prefer, require, verify-ca or verify-full"));
            }
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Allow => "allow",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }

    fn verifies(self) -> bool {
        matches!(self, SslMode::VerifyCa | SslMode::VerifyFull)
    }
}

/// A malformed TLS setting: which URL parameter (`sslmode`, `sslrootcert`) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamError {
    pub param: &'static str,
    pub reason: String,
}

fn bad(param: &'static str, reason: impl Into<String>) -> ParamError {
    ParamError { param, reason: reason.into() }
}

/// What a URL asks of TLS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsParams {
    /// The mode; `None` when the URL names none (libpq's default `prefer`, or `verify-full` with
    /// `sslrootcert=system`).
    pub mode: Option<SslMode>,
    /// `sslrootcert`, percent-decoded: a PEM file, or `system` (the platform's trust store).
    pub root_cert: Option<String>,
}

/// Splits od's TLS parameters off a `postgres://` URL: the URL tokio-postgres is given (without
/// `sslmode`/`sslrootcert`; it rejects what it does not know) and what they asked for.
pub fn split_url(url: &str) -> Result<(String, TlsParams), ParamError> {
    let Some(q) = url.find('?') else {
        return Ok((url.to_string(), TlsParams { mode: None, root_cert: None }));
    };
    let (base, query) = (&url[..q], &url[q + 1..]);
    let mut params = TlsParams { mode: None, root_cert: None };
    let mut rest = Vec::new();
    for part in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = part.split_once('=').unwrap_or((part, ""));
        match k {
            "sslmode" => params.mode = Some(SslMode::parse(&decode(v)).map_err(|r| bad("sslmode", r))?),
            "sslrootcert" => {
                let v = decode(v);
                if v.is_empty() {
                    return Err(bad("sslrootcert", "is empty: name a PEM file of CA certificates, or `system`"));
                }
                params.root_cert = Some(v);
            }
            "sslcert" | "sslkey" | "sslpassword" => {
                return Err(bad("sslmode", format!("{k}: client certificates are not supported by od")));
            }
            _ => rest.push(part),
        }
    }
    if params.root_cert.as_deref() == Some("system") {
        // libpq 16: the system's roots are only worth using with the host name checked.
        match params.mode {
            None => params.mode = Some(SslMode::VerifyFull),
            Some(SslMode::VerifyFull) => {}
            Some(m) => {
                return Err(bad(
                    "sslmode",
                    format!("sslmode={} with sslrootcert=system: use verify-full (as libpq does)", m.name()),
                ))
            }
        }
    }
    let out = if rest.is_empty() { base.to_string() } else { format!("{base}?{}", rest.join("&")) };
    Ok((out, params))
}

/// `%XX` decoded (a path in a URL's query).
fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (b[i], b.get(i + 1).copied().and_then(hex), b.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, ..) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The roots a connection checks against, and how messages name them.
#[derive(Clone)]
struct Roots {
    store: Arc<RootCertStore>,
    /// `sslrootcert=/path`, `sslrootcert=system`, or libpq's default file.
    label: String,
}

/// libpq's default root file when no `sslrootcert` is given: `~/.postgresql/root.crt`.
pub fn default_root_file(home: Option<&Path>) -> Option<PathBuf> {
    home.map(|h| h.join(".postgresql").join("root.crt"))
}

fn load_roots(params: &TlsParams, home: Option<&Path>) -> Result<Option<Roots>, ParamError> {
    let (path, label) = match params.root_cert.as_deref() {
        Some("system") => return system_roots().map(Some),
        Some(p) => (PathBuf::from(p), format!("sslrootcert={p}")),
        None => match default_root_file(home).filter(|p| p.is_file()) {
            Some(p) => {
                let label = format!("sslrootcert={} (libpq's default)", p.display());
                (p, label)
            }
            None => return Ok(None),
        },
    };
    let meta = std::fs::metadata(&path).map_err(|e| bad("sslrootcert", format!("{}: {e}", path.display())))?;
    if meta.len() > crate::limits::PG_ROOT_CERT_MAX_BYTES {
        return Err(bad(
            "sslrootcert",
            format!("{} is {} bytes, over {}", path.display(), meta.len(), crate::limits::PG_ROOT_CERT_MAX_BYTES),
        ));
    }
    let pem = std::fs::read(&path).map_err(|e| bad("sslrootcert", format!("{}: {e}", path.display())))?;
    use rustls::pki_types::pem::PemObject;
    let mut store = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| bad("sslrootcert", format!("{}: not PEM: {e}", path.display())))?;
        store.add(cert).map_err(|e| bad("sslrootcert", format!("{}: a bad CA certificate: {e}", path.display())))?;
    }
    if store.is_empty() {
        return Err(bad("sslrootcert", format!("{} holds no PEM certificate", path.display())));
    }
    Ok(Some(Roots { store: Arc::new(store), label }))
}

/// The platform's trust store (rustls-native-certs: the system bundle, or `SSL_CERT_FILE` /
/// `SSL_CERT_DIR`), for `sslrootcert=system`.
fn system_roots() -> Result<Roots, ParamError> {
    let found = rustls_native_certs::load_native_certs();
    let mut store = RootCertStore::empty();
    let (_added, _ignored) = store.add_parsable_certificates(found.certs);
    if store.is_empty() {
        let why = found.errors.first().map(|e| format!(": {e}")).unwrap_or_default();
        return Err(bad("sslrootcert", format!("system: the platform's trust store has no certificates{why}")));
    }
    Ok(Roots { store: Arc::new(store), label: "sslrootcert=system".into() })
}

/// What connections to one database check: the mode and its rustls configuration.
#[derive(Clone)]
pub struct Tls {
    pub mode: SslMode,
    config: Arc<rustls::ClientConfig>,
    roots: Option<String>,
}

impl Tls {
    /// The TLS of `params` (roots read now; `home` finds libpq's default root file). verify-*
    /// without any roots is an error naming `sslrootcert`.
    pub fn new(params: &TlsParams, home: Option<&Path>) -> Result<Tls, ParamError> {
        let mode = params.mode.unwrap_or(SslMode::Prefer);
        let roots = if mode == SslMode::Disable { None } else { load_roots(params, home)? };
        if mode.verifies() && roots.is_none() {
            let default = default_root_file(home).map(|p| format!(" (nor is libpq's default {})", p.display()));
            return Err(bad(
                "sslrootcert",
                format!(
                    "sslmode={} checks the server's certificate, but no CA is given{}: set sslrootcert to a PEM \
                     file of the CA that signed it, or sslrootcert=system",
                    mode.name(),
                    default.unwrap_or_default()
                ),
            ));
        }
        // ring, as the rest of od's TLS (net::tls::provider says why).
        let provider = crate::net::tls::provider();
        let verifier = Verifier {
            roots: roots.as_ref().map(|r| r.store.clone()),
            check_name: mode == SslMode::VerifyFull,
            algs: provider.signature_verification_algorithms,
        };
        let config = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| bad("sslmode", format!("TLS setup: {e}")))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth();
        Ok(Tls { mode, config: Arc::new(config), roots: roots.map(|r| r.label) })
    }
}

/// The server certificate check of every od connection to PostgreSQL. With roots (verify-ca,
/// verify-full, and — as libpq does — require/prefer/allow when a root file is given or found),
/// the chain must lead to one of them, and under verify-full the certificate must name the host.
///
/// Without roots it accepts any certificate: this exists ONLY for libpq's `require`, `prefer` and
/// `allow`, which encrypt without authenticating the server (libpq's documented meaning, which
/// hosted databases' `sslmode=require` instructions rely on). `Tls::new` never builds it without
/// roots for verify-ca/verify-full. Handshake signatures are checked in every mode.
#[derive(Debug)]
struct Verifier {
    roots: Option<Arc<RootCertStore>>,
    check_name: bool,
    algs: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        _ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(roots) = &self.roots else {
            // libpq's require/prefer/allow without a root certificate: no verification (see above).
            return Ok(ServerCertVerified::assertion());
        };
        let cert = rustls::server::ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_cert_signed_by_trust_anchor(&cert, roots, intermediates, now, self.algs.all)?;
        if self.check_name {
            rustls::client::verify_server_name(&cert, server_name)?;
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algs)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algs)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algs.supported_schemes()
    }
}

/// Why a TLS handshake with the server failed, in words (found in a tokio-postgres error's
/// sources by `conn.rs`).
#[derive(Debug)]
pub struct HandshakeError(pub String);

impl std::fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for HandshakeError {}

impl Tls {
    fn explain(&self, host: &str, e: std::io::Error) -> HandshakeError {
        let roots = self.roots.as_deref().unwrap_or("sslrootcert");
        let why = match e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
            Some(rustls::Error::InvalidCertificate(c)) => {
                match c {
                    CertificateError::UnknownIssuer => {
                        format!("the server's certificate is not signed by a CA in {roots}")
                    }
                    CertificateError::BadSignature => {
                        format!("the server's certificate is not signed by a CA in {roots} (one of the same name, another key)")
                    }
                    CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                        format!("the server's certificate is not valid for host {host}")
                    }
                    CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                        "the server's certificate has expired".into()
                    }
                    CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                        "the server's certificate is not valid yet".into()
                    }
                    other => format!("the server's certificate was refused: {other:?}"),
                }
            }
            Some(other) => format!("handshake failed: {other}"),
            None => format!("handshake failed: {e}"),
        };
        HandshakeError(format!("TLS ({}): {why}", self.mode.name()))
    }
}

impl MakeTlsConnect<Socket> for Tls {
    type Stream = TlsStream;
    type TlsConnect = Connect;
    type Error = HandshakeError;

    fn make_tls_connect(&mut self, host: &str) -> Result<Connect, HandshakeError> {
        let name = ServerName::try_from(host.to_string())
            .map_err(|e| HandshakeError(format!("TLS: {host:?} is not a host name for TLS: {e}")))?;
        Ok(Connect { tls: self.clone(), host: host.to_string(), name })
    }
}

/// One connection's handshake.
pub struct Connect {
    tls: Tls,
    host: String,
    name: ServerName<'static>,
}

impl TlsConnect<Socket> for Connect {
    type Stream = TlsStream;
    type Error = HandshakeError;
    type Future = Pin<Box<dyn std::future::Future<Output = Result<TlsStream, HandshakeError>> + Send>>;

    fn connect(self, socket: Socket) -> Self::Future {
        Box::pin(async move {
            let connector = tokio_rustls::TlsConnector::from(self.tls.config.clone());
            match connector.connect(self.name, socket).await {
                Ok(s) => Ok(TlsStream(s)),
                Err(e) => Err(self.tls.explain(&self.host, e)),
            }
        })
    }
}

/// A TLS connection to the server.
pub struct TlsStream(tokio_rustls::client::TlsStream<Socket>);

impl tokio_postgres::tls::TlsStream for TlsStream {
    fn channel_binding(&self) -> ChannelBinding {
        // SCRAM's channel binding (tls-server-end-point) is not offered: SCRAM-SHA-256 without it,
        // as libpq's default `channel_binding=prefer` does when binding is unavailable.
        ChannelBinding::none()
    }
}

impl AsyncRead for TlsStream {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for TlsStream {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tls_parameters_are_taken_off_and_the_rest_passed_on() {
        let (rest, p) = split_url("postgres://u@h/db").unwrap();
        assert_eq!((rest.as_str(), p.mode, p.root_cert), ("postgres://u@h/db", None, None));
        let (rest, p) = split_url(
            "postgres://u@h/db?application_name=od&sslmode=verify-ca&sslrootcert=%2Ftmp%2Fca.pem&connect_timeout=5",
        )
        .unwrap();
        assert_eq!(rest, "postgres://u@h/db?application_name=od&connect_timeout=5");
        assert_eq!(p.mode, Some(SslMode::VerifyCa));
        assert_eq!(p.root_cert.as_deref(), Some("/tmp/ca.pem"));
        // libpq 16: sslrootcert=system means verify-full, and refuses weaker modes.
        assert_eq!(split_url("postgres://h/d?sslrootcert=system").unwrap().1.mode, Some(SslMode::VerifyFull));
        assert_eq!(split_url("postgres://h/d?sslrootcert=system&sslmode=require").unwrap_err().param, "sslmode");
        assert_eq!(split_url("postgres://h/d?sslmode=on").unwrap_err().param, "sslmode");
        assert_eq!(split_url("postgres://h/d?sslcert=/c.pem").unwrap_err().param, "sslmode");
    }

    #[test]
    fn verifying_without_any_root_is_refused_naming_sslrootcert() {
        let home = tempfile::tempdir().unwrap();
        for mode in [SslMode::VerifyCa, SslMode::VerifyFull] {
            let e = Tls::new(&TlsParams { mode: Some(mode), root_cert: None }, Some(home.path())).err().unwrap();
            assert_eq!(e.param, "sslrootcert");
            assert!(e.reason.contains(mode.name()) && e.reason.contains("root.crt"), "{}", e.reason);
        }
        // require without roots encrypts without verifying (libpq's meaning): it builds.
        let t = Tls::new(&TlsParams { mode: Some(SslMode::Require), root_cert: None }, Some(home.path())).unwrap();
        assert!(t.roots.is_none());
        // libpq's default root file is used when present: require then checks the chain.
        let ca = rcgen::generate_simple_self_signed(vec!["ca".into()]).unwrap();
        std::fs::create_dir_all(home.path().join(".postgresql")).unwrap();
        std::fs::write(home.path().join(".postgresql/root.crt"), ca.cert.pem()).unwrap();
        let t = Tls::new(&TlsParams { mode: Some(SslMode::Require), root_cert: None }, Some(home.path())).unwrap();
        assert!(t.roots.as_deref().is_some_and(|r| r.contains("root.crt")), "{:?}", t.roots);
        let t = Tls::new(&TlsParams { mode: Some(SslMode::VerifyFull), root_cert: None }, Some(home.path())).unwrap();
        assert!(t.roots.is_some());
        // A file without certificates is refused, naming it.
        std::fs::write(home.path().join("empty.pem"), "nothing here\n").unwrap();
        let p = home.path().join("empty.pem").display().to_string();
        let e = Tls::new(&TlsParams { mode: Some(SslMode::Require), root_cert: Some(p) }, None).err().unwrap();
        assert!(e.param == "sslrootcert" && e.reason.contains("empty.pem"), "{e:?}");
    }

    /// A CA, and a server certificate it signed for `names`, valid from `from` to `until` (years).
    fn certs(names: &[&str], from: i32, until: i32) -> (String, String, String) {
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca.distinguished_name.push(rcgen::DnType::CommonName, format!("test CA {}", names[0]));
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let ca = ca.self_signed(&ca_key).unwrap();
        let mut p = rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
        p.not_before = rcgen::date_time_ymd(from, 1, 1);
        p.not_after = rcgen::date_time_ymd(until, 1, 1);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = p.signed_by(&key, &ca, &ca_key).unwrap();
        (ca.pem(), cert.pem(), key.serialize_pem())
    }

    /// A real handshake in memory between `tls`'s client configuration (as `host`) and a rustls
    /// server serving `cert`/`key`: the reason `tls` gives if it fails.
    fn handshake(tls: &Tls, host: &str, cert: &str, key: &str) -> Result<(), String> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::PrivateKeyDer;
        let chain: Vec<_> = CertificateDer::pem_slice_iter(cert.as_bytes()).map(|c| c.unwrap()).collect();
        let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap();
        let server = rustls::ServerConfig::builder_with_provider(crate::net::tls::provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap();
        let mut server = rustls::ServerConnection::new(Arc::new(server)).unwrap();
        let name = ServerName::try_from(host.to_string()).unwrap();
        let mut client = rustls::ClientConnection::new(tls.config.clone(), name).unwrap();
        for _ in 0..10 {
            let mut buf = Vec::new();
            client.write_tls(&mut buf).unwrap();
            server.read_tls(&mut &buf[..]).unwrap();
            server.process_new_packets().unwrap();
            buf.clear();
            server.write_tls(&mut buf).unwrap();
            client.read_tls(&mut &buf[..]).unwrap();
            if let Err(e) = client.process_new_packets() {
                let e = std::io::Error::new(std::io::ErrorKind::InvalidData, e);
                return Err(tls.explain(host, e).to_string());
            }
            if !client.is_handshaking() {
                return Ok(());
            }
        }
        panic!("the handshake did not finish")
    }

    fn tls_with(mode: SslMode, ca_pem: Option<&str>, dir: &Path) -> Tls {
        let root_cert = ca_pem.map(|pem| {
            let p = dir.join(format!("ca-{}.pem", blake3::hash(pem.as_bytes()).to_hex()));
            std::fs::write(&p, pem).unwrap();
            p.display().to_string()
        });
        Tls::new(&TlsParams { mode: Some(mode), root_cert }, Some(dir)).unwrap()
    }

    #[test]
    fn each_mode_checks_what_libpq_checks_and_says_why_it_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (ca, cert, key) = certs(&["db.example.test", "127.0.0.1"], 2000, 2200);
        let (other_ca, ..) = certs(&["x"], 2000, 2200);
        let full = tls_with(SslMode::VerifyFull, Some(&ca), dir.path());
        assert_eq!(handshake(&full, "db.example.test", &cert, &key), Ok(()));
        assert_eq!(handshake(&full, "127.0.0.1", &cert, &key), Ok(()), "an IP SAN matches an IP host");
        let e = handshake(&full, "other.example.test", &cert, &key).unwrap_err();
        assert!(e.contains("TLS (verify-full)") && e.contains("not valid for host other.example.test"), "{e}");
        // An IP host the certificate does not list as an IP address is refused too.
        let e = handshake(&full, "127.0.0.2", &cert, &key).unwrap_err();
        assert!(e.contains("not valid for host 127.0.0.2"), "{e}");
        let ca_only = tls_with(SslMode::VerifyCa, Some(&ca), dir.path());
        assert_eq!(handshake(&ca_only, "other.example.test", &cert, &key), Ok(()));
        let wrong = tls_with(SslMode::VerifyCa, Some(&other_ca), dir.path());
        let e = handshake(&wrong, "db.example.test", &cert, &key).unwrap_err();
        assert!(e.contains("TLS (verify-ca)") && e.contains("not signed by a CA in sslrootcert="), "{e}");
        let (ca, old, old_key) = certs(&["db.example.test"], 2000, 2001);
        let full = tls_with(SslMode::VerifyFull, Some(&ca), dir.path());
        let e = handshake(&full, "db.example.test", &old, &old_key).unwrap_err();
        assert!(e.contains("has expired"), "{e}");
        // require without a root encrypts without checking (libpq's meaning): even this passes.
        let require = tls_with(SslMode::Require, None, dir.path());
        assert_eq!(handshake(&require, "anything.test", &old, &old_key), Ok(()));
        // ...but with a root given, require checks the chain (as libpq does).
        let require = tls_with(SslMode::Require, Some(&other_ca), dir.path());
        let e = handshake(&require, "db.example.test", &cert, &key).unwrap_err();
        assert!(e.contains("TLS (require)") && e.contains("not signed by a CA"), "{e}");
    }
}
