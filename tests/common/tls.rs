//! TLS counterparts for tests: a CA made in the test (rcgen), server certificates signed by it
//! (good, expired, for another host, or from a CA nobody trusts), and [`TlsFront`], an HTTPS
//! front on loopback that terminates TLS with one of them and forwards the bytes to a plain
//! loopback server — so any fake server of the tests is reachable over real HTTPS.

use rcgen::{BasicConstraints, Certificate, CertificateParams, DnType, IsCa, KeyPair, SanType};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A certificate authority made for one test, its PEM written to `<dir>/<name>-ca.pem`.
pub struct TestCa {
    cert: Certificate,
    key: KeyPair,
    /// The CA certificate (PEM file): what `SSL_CERT_FILE` / `OD_CA_FILE` name.
    pub pem_path: PathBuf,
}

/// A server certificate and its key, in PEM (also as files, for `--tls-cert` / `--tls-key`).
pub struct ServerCert {
    pub cert_pem: String,
    pub key_pem: String,
    pub cert_path: PathBuf,
    pub key_path: PathBuf,
}

/// What a server certificate is wrong about, if anything.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Flaw {
    /// Valid for `localhost` and `127.0.0.1`, now.
    None,
    /// Valid for those names, but it expired in 2021.
    Expired,
    /// Valid now, but only for `other.example`.
    WrongHost,
}

impl TestCa {
    /// A new CA named `name`, its PEM written into `dir`.
    pub fn new(dir: &Path, name: &str) -> TestCa {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, format!("od test CA {name}"));
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        std::fs::create_dir_all(dir).unwrap();
        let pem_path = dir.join(format!("{name}-ca.pem"));
        std::fs::write(&pem_path, cert.pem()).unwrap();
        TestCa { cert, key, pem_path }
    }

    /// A server certificate signed by this CA, with `flaw`; files `<dir>/<file>.crt|.key`.
    pub fn server_cert(&self, dir: &Path, file: &str, flaw: Flaw) -> ServerCert {
        let names = match flaw {
            Flaw::WrongHost => vec!["other.example".to_string()],
            _ => vec!["localhost".to_string()],
        };
        let mut params = CertificateParams::new(names).unwrap();
        if flaw != Flaw::WrongHost {
            params.subject_alt_names.push(SanType::IpAddress([127, 0, 0, 1].into()));
        }
        params.distinguished_name.push(DnType::CommonName, file);
        if flaw == Flaw::Expired {
            params.not_before = rcgen::date_time_ymd(2020, 1, 1);
            params.not_after = rcgen::date_time_ymd(2021, 1, 1);
        }
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.cert, &self.key).unwrap();
        let (cert_path, key_path) = (dir.join(format!("{file}.crt")), dir.join(format!("{file}.key")));
        std::fs::write(&cert_path, cert.pem()).unwrap();
        std::fs::write(&key_path, key.serialize_pem()).unwrap();
        ServerCert { cert_pem: cert.pem(), key_pem: key.serialize_pem(), cert_path, key_path }
    }
}

impl ServerCert {
    /// A rustls server config serving this certificate (ALPN http/1.1).
    pub fn server_config(&self) -> Arc<rustls::ServerConfig> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let certs = vec![CertificateDer::from_pem_slice(self.cert_pem.as_bytes()).unwrap()];
        let key = PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes()).unwrap();
        let mut cfg = rustls::ServerConfig::builder_with_provider(od::net::tls::provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .unwrap();
        cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
        Arc::new(cfg)
    }
}

/// An HTTPS front on `127.0.0.1:<port>` forwarding to a plain server; stops when dropped.
pub struct TlsFront {
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TlsFront {
    /// Serves `cert` and forwards each connection's decrypted bytes to `upstream`.
    pub fn start(cert: &ServerCert, upstream: SocketAddr) -> TlsFront {
        let acceptor = tokio_rustls::TlsAcceptor::from(cert.server_config());
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                loop {
                    let (tcp, _) = tokio::select! {
                        _ = &mut stopped => return,
                        r = listener.accept() => match r { Ok(c) => c, Err(_) => continue },
                    };
                    let acceptor = acceptor.clone();
                    tokio::spawn(async move {
                        // A client that refuses the certificate ends the handshake: nothing to forward.
                        let Ok(mut tls) = acceptor.accept(tcp).await else { return };
                        let Ok(mut up) = tokio::net::TcpStream::connect(upstream).await else { return };
                        let _ = tokio::io::copy_bidirectional(&mut tls, &mut up).await;
                    });
                }
            });
        });
        TlsFront { addr, stop: Some(stop), thread: Some(thread) }
    }

    /// `https://localhost:<port>` (the name the good certificate is for).
    pub fn url(&self) -> String {
        format!("https://localhost:{}", self.addr.port())
    }
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
