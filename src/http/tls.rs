//! The daemon's own TLS: the certificate chain and private key it serves (`--tls-cert` /
//! `--tls-key`, `OD_TLS_CERT` / `OD_TLS_KEY`), read once at start and checked into one rustls
//! [`ServerConfig`] — ring, TLS 1.2 and 1.3 only, ALPN `http/1.1`, no client certificates.
//!
//! The cert file is PEM and may hold a chain (leaf first, then intermediates): all of it is
//! served. The key file is PEM, PKCS#8, PKCS#1 (RSA) or SEC1 (EC). A missing, unreadable, empty or
//! oversized file, a key ring cannot use, or a key that does not belong to the leaf certificate is
//! a [`TlsServeError`] naming the flag, its variable and the file, before anything is opened or
//! bound. `serve.rs` wraps each accepted connection in this config, inside its own guards.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::ServerConfig;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::limits::TLS_PEM_MAX_BYTES;

/// The files of `--tls-cert` and `--tls-key`.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

const CERT_SETTING: &str = "--tls-cert (OD_TLS_CERT)";
const KEY_SETTING: &str = "--tls-key (OD_TLS_KEY)";

/// Why the daemon's TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsServeError {
    /// One of the two settings was given without the other.
    #[error("{given} was given without {missing}: a TLS listener needs both (PEM files)")]
    Half { given: &'static str, missing: &'static str },
    /// The certificate file is missing, unreadable, too large, or holds no PEM certificate.
    #[error("{setting} {path}: {reason}")]
    Cert { setting: &'static str, path: PathBuf, reason: String },
    /// The key file is missing, unreadable, too large, holds no PEM private key, or a key ring
    /// cannot sign with.
    #[error("{setting} {path}: {reason}")]
    Key { setting: &'static str, path: PathBuf, reason: String },
    /// The key is not the leaf certificate's.
    #[error("{KEY_SETTING} {key} is not the private key of the certificate in {CERT_SETTING} {cert}: {reason}")]
    Mismatch { cert: PathBuf, key: PathBuf, reason: String },
}

impl TlsServeError {
    /// The setting at fault (`--tls-cert`, `--tls-key`), for the error's data.
    pub fn setting(&self) -> &'static str {
        match self {
            Self::Half { missing, .. } if *missing == KEY_SETTING => "--tls-key",
            Self::Half { .. } => "--tls-cert",
            Self::Cert { .. } => "--tls-cert",
            Self::Key { .. } | Self::Mismatch { .. } => "--tls-key",
        }
    }
}

impl TlsFiles {
    /// Both files, one, or none: one without the other is an error.
    pub fn pair(cert: Option<PathBuf>, key: Option<PathBuf>) -> Result<Option<Self>, TlsServeError> {
        match (cert, key) {
            (Some(cert), Some(key)) => Ok(Some(Self { cert, key })),
            (None, None) => Ok(None),
            (Some(_), None) => Err(TlsServeError::Half { given: CERT_SETTING, missing: KEY_SETTING }),
            (None, Some(_)) => Err(TlsServeError::Half { given: KEY_SETTING, missing: CERT_SETTING }),
        }
    }
}

/// Reads a PEM file of at most [`TLS_PEM_MAX_BYTES`].
fn read_pem(path: &Path) -> Result<Vec<u8>, String> {
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if meta.len() > TLS_PEM_MAX_BYTES {
        return Err(format!("{} bytes, over the {TLS_PEM_MAX_BYTES}-byte bound of a PEM file", meta.len()));
    }
    std::fs::read(path).map_err(|e| e.to_string())
}

fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsServeError> {
    let bad = |reason: String| TlsServeError::Cert { setting: CERT_SETTING, path: path.to_path_buf(), reason };
    let pem = read_pem(path).map_err(bad)?;
    let chain = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(format!("not a PEM certificate file: {e}")))?;
    if chain.is_empty() {
        return Err(bad("no PEM certificate (-----BEGIN CERTIFICATE-----) in it".into()));
    }
    Ok(chain)
}

fn key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsServeError> {
    let bad = |reason: String| TlsServeError::Key { setting: KEY_SETTING, path: path.to_path_buf(), reason };
    let pem = read_pem(path).map_err(bad)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| bad(format!("no PEM private key (PKCS#8, RSA or EC) in it: {e}")))
}

/// Reads and checks both files into the config every TLS connection of the daemon uses.
pub fn server_config(files: &TlsFiles) -> Result<Arc<ServerConfig>, TlsServeError> {
    let chain = certs(&files.cert)?;
    let key = key(&files.key)?;
    let provider = crate::net::tls::provider();
    let signing = provider.key_provider.load_private_key(key.clone_key()).map_err(|e| TlsServeError::Key {
        setting: KEY_SETTING,
        path: files.key.clone(),
        reason: format!("not a key this build can sign with: {e}"),
    })?;
    let certified = rustls::sign::CertifiedKey::new(chain.clone(), signing);
    match certified.keys_match() {
        Ok(()) | Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => {}
        Err(e) => {
            return Err(TlsServeError::Mismatch {
                cert: files.cert.clone(),
                key: files.key.clone(),
                reason: e.to_string(),
            })
        }
    }
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| TlsServeError::Cert { setting: CERT_SETTING, path: files.cert.clone(), reason: e.to_string() })?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| TlsServeError::Mismatch {
            cert: files.cert.clone(),
            key: files.key.clone(),
            reason: e.to_string(),
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, body: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, body).unwrap();
        p
    }

    fn self_signed() -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".into()]).unwrap().self_signed(&key).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    #[test]
    fn a_matching_pair_loads_with_alpn_http11() {
        let dir = tempfile::tempdir().unwrap();
        let (c, k) = self_signed();
        let files = TlsFiles { cert: write(dir.path(), "c.pem", &c), key: write(dir.path(), "k.pem", &k) };
        let config = server_config(&files).unwrap();
        assert_eq!(config.alpn_protocols, vec![b"http/1.1".to_vec()]);
    }

    #[test]
    fn bad_files_name_the_setting_and_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let (c, k) = self_signed();
        let (_, other_key) = self_signed();
        let cert = write(dir.path(), "c.pem", &c);
        let key = write(dir.path(), "k.pem", &k);
        let missing = dir.path().join("absent.pem");
        let garbage = write(dir.path(), "g.pem", "not pem at all");
        let cases = [
            (TlsFiles { cert: missing.clone(), key: key.clone() }, "--tls-cert (OD_TLS_CERT)", &missing),
            (TlsFiles { cert: garbage.clone(), key: key.clone() }, "--tls-cert (OD_TLS_CERT)", &garbage),
            (TlsFiles { cert: cert.clone(), key: garbage.clone() }, "--tls-key (OD_TLS_KEY)", &garbage),
            (TlsFiles { cert: key.clone(), key: key.clone() }, "--tls-cert (OD_TLS_CERT)", &key),
        ];
        for (files, setting, file) in cases {
            let msg = server_config(&files).unwrap_err().to_string();
            assert!(msg.contains(setting) && msg.contains(&file.display().to_string()), "{msg}");
        }
        let wrong = write(dir.path(), "other.pem", &other_key);
        let e = server_config(&TlsFiles { cert: cert.clone(), key: wrong.clone() }).unwrap_err();
        assert!(matches!(e, TlsServeError::Mismatch { .. }), "{e}");
        assert!(e.to_string().contains(&wrong.display().to_string()) && e.to_string().contains("c.pem"), "{e}");
    }

    #[test]
    fn one_file_without_the_other_is_refused() {
        let e = TlsFiles::pair(Some("c.pem".into()), None).unwrap_err();
        assert!(e.to_string().contains("--tls-key (OD_TLS_KEY)"), "{e}");
        assert!(TlsFiles::pair(None, None).unwrap().is_none());
    }
}
