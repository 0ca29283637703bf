//! TLS for od's clients: the one rustls [`ClientConfig`] that every outbound HTTPS request and the
//! CLI's requests to an `https://` daemon use, and the naming of a refused certificate.
//!
//! What is trusted, in one place:
//! - the platform's store, read by `rustls-native-certs` (on Linux the distribution's bundle under
//!   `/etc/ssl/certs`: what curl and git on the same machine trust, a company CA installed by the
//!   administrator included). As for curl, git and Python, `SSL_CERT_FILE` / `SSL_CERT_DIR` name
//!   the bundle when set;
//! - every certificate in `OD_CA_FILE` (PEM), *added* to that store: a private CA for one server
//!   without replacing what else is trusted.
//!
//! There is no switch that accepts an invalid certificate: tests trust their own CA through the
//! same two settings. The config is built once per distinct set of those settings.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// The settings that name extra trusted certificates.
pub const CA_FILE_ENV: &str = "OD_CA_FILE";

/// Why no TLS client could be set up.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TlsSetupError {
    /// A CA file named by a setting could not be read or holds no certificate.
    #[error("{setting}={path}: {message}")]
    CaFile { setting: &'static str, path: String, message: String },
    /// No root at all: nothing could ever be verified.
    #[error(
        "no trusted certificate authorities: the platform's store is empty or unreadable ({0}); \
         install the ca-certificates package, or name a PEM bundle in SSL_CERT_FILE or OD_CA_FILE"
    )]
    NoRoots(String),
}

/// Why a server's certificate was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CertProblem {
    /// Not signed by a trusted CA (or self-signed).
    Untrusted,
    /// Valid, but not for the host name (or address) in the URL.
    WrongHost,
    /// Past its validity period.
    Expired,
    /// Before its validity period.
    NotYetValid,
    /// Revoked, or otherwise refused by the verifier.
    Other(String),
}

impl CertProblem {
    /// The stable error code: `tls-untrusted`, `tls-wrong-host`, `tls-expired`, `tls-certificate`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Untrusted => "tls-untrusted",
            Self::WrongHost => "tls-wrong-host",
            Self::Expired | Self::NotYetValid => "tls-expired",
            Self::Other(_) => "tls-certificate",
        }
    }
}

impl std::fmt::Display for CertProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Untrusted => f.write_str(
                "the server's certificate is not signed by a trusted certificate authority \
                 (add its CA with OD_CA_FILE or SSL_CERT_FILE)",
            ),
            Self::WrongHost => f.write_str("the server's certificate is not valid for this host name"),
            Self::Expired => f.write_str("the server's certificate has expired"),
            Self::NotYetValid => f.write_str("the server's certificate is not valid yet (check the clock)"),
            Self::Other(m) => write!(f, "the server's certificate was refused: {m}"),
        }
    }
}

type Cached = (Vec<Option<std::ffi::OsString>>, Arc<ClientConfig>);
static CACHE: Mutex<Option<Cached>> = Mutex::new(None);

/// The client config for the current settings (built on first use and when a setting changed).
pub fn client_config() -> Result<Arc<ClientConfig>, TlsSetupError> {
    let key: Vec<_> = ["SSL_CERT_FILE", "SSL_CERT_DIR", CA_FILE_ENV].iter().map(std::env::var_os).collect();
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((k, cfg)) = cache.as_ref() {
        if *k == key {
            return Ok(cfg.clone());
        }
    }
    let cfg = Arc::new(build(&roots()?));
    *cache = Some((key, cfg.clone()));
    Ok(cfg)
}

/// The crypto provider of every TLS connection od makes or serves: ring. rustls 0.23.48 marks
/// ring's provider deprecated because it has no post-quantum key exchange (X25519MLKEM768, which
/// only aws-lc-rs offers); aws-lc-rs builds a large C library (cmake-era build scripts, minutes on
/// the 2-core machines od is built on), so od stays on ring's classical X25519/ECDHE suites until
/// ring has a post-quantum group. One place to change when it does.
#[allow(deprecated)]
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A client config trusting exactly `roots` (HTTP/1.1 over ALPN, TLS 1.2 and 1.3, ring).
pub fn build(roots: &RootCertStore) -> ClientConfig {
    let mut cfg = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .with_root_certificates(roots.clone())
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    cfg
}

/// The trusted roots: the platform's store plus `OD_CA_FILE`.
pub fn roots() -> Result<RootCertStore, TlsSetupError> {
    let mut store = RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    // A bundle with a few unparsable entries still counts; the errors matter only when nothing loaded.
    let (added, _) = store.add_parsable_certificates(native.certs);
    let mut why = native.errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ");
    if let Some(path) = std::env::var_os(CA_FILE_ENV).filter(|p| !p.is_empty()) {
        for cert in read_pem_certs(CA_FILE_ENV, Path::new(&path))? {
            store.add(cert).map_err(|e| TlsSetupError::CaFile {
                setting: CA_FILE_ENV,
                path: Path::new(&path).display().to_string(),
                message: e.to_string(),
            })?;
        }
    }
    if store.is_empty() {
        if why.is_empty() {
            why = format!("{added} certificates found");
        }
        return Err(TlsSetupError::NoRoots(why));
    }
    Ok(store)
}

/// Every certificate in a PEM file; an error naming `setting` when it cannot be read or has none.
pub fn read_pem_certs(setting: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsSetupError> {
    let fail = |message: String| TlsSetupError::CaFile { setting, path: path.display().to_string(), message };
    let bytes = std::fs::read(path).map_err(|e| fail(e.to_string()))?;
    let certs: Vec<_> =
        CertificateDer::pem_slice_iter(&bytes).collect::<Result<_, _>>().map_err(|e| fail(format!("not PEM: {e}")))?;
    if certs.is_empty() {
        return Err(fail("no CERTIFICATE block in the file".into()));
    }
    Ok(certs)
}

/// The certificate problem somewhere in `err`'s chain (through `io::Error` wrappers, which hide
/// their inner error from `source()`), if the failure was a refused certificate.
pub fn classify(err: &(dyn std::error::Error + 'static)) -> Option<CertProblem> {
    let mut at: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = at {
        if let Some(p) = e.downcast_ref::<rustls::Error>().and_then(problem) {
            return Some(p);
        }
        if let Some(inner) = e.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref()) {
            if let Some(p) = classify(inner) {
                return Some(p);
            }
        }
        at = e.source();
    }
    None
}

fn problem(e: &rustls::Error) -> Option<CertProblem> {
    use rustls::CertificateError as C;
    match e {
        rustls::Error::InvalidCertificate(c) => Some(match c {
            C::UnknownIssuer | C::BadSignature | C::UnhandledCriticalExtension => CertProblem::Untrusted,
            C::NotValidForName | C::NotValidForNameContext { .. } => CertProblem::WrongHost,
            C::Expired | C::ExpiredContext { .. } => CertProblem::Expired,
            C::NotValidYet | C::NotValidYetContext { .. } => CertProblem::NotYetValid,
            other => CertProblem::Other(format!("{other:?}")),
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classify_sees_through_io_errors() {
        let tls = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        let io = std::io::Error::new(std::io::ErrorKind::InvalidData, tls);
        assert_eq!(classify(&io), Some(CertProblem::Untrusted));
        let name = rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForName);
        assert_eq!(classify(&name).map(|p| p.code()), Some("tls-wrong-host"));
        let plain = std::io::Error::other("connection refused");
        assert_eq!(classify(&plain), None);
    }

    #[test]
    fn a_ca_file_without_certificates_is_named() {
        let dir = std::env::temp_dir().join(format!("od-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("empty.pem");
        std::fs::write(&f, "nothing here\n").unwrap();
        let e = read_pem_certs(CA_FILE_ENV, &f).unwrap_err().to_string();
        assert!(e.starts_with("OD_CA_FILE=") && e.contains("no CERTIFICATE"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
