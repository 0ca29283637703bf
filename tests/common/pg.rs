//! A private PostgreSQL server for tests: `initdb` into a temporary folder and `postgres` on a free
//! loopback port, from the machine's own packages (`/usr/lib/postgresql/<v>/bin`, or
//! `OD_PG_BINDIR`). Run as root (CI), the server runs as the `postgres` user (PostgreSQL refuses
//! root). Missing binaries fail the test, naming the fix: a PostgreSQL test never passes by
//! skipping. One server per test binary while any test holds it; each test gets its own database.
//! [`tls_server`] is the binary's one server with `ssl=on`, its certificate (for `localhost` and
//! 127.0.0.1) signed by a CA made in the test with rcgen.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

pub struct PgServer {
    pub port: u16,
    dir: tempfile::TempDir,
    child: Mutex<Child>,
    bin: PathBuf,
    /// `-c name=value` settings beyond the defaults (TLS), kept for restarts.
    extra: Vec<String>,
}

fn bindir() -> PathBuf {
    if let Ok(d) = std::env::var("OD_PG_BINDIR") {
        return PathBuf::from(d);
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|rd| {
            rd.filter_map(|e| e.ok()).map(|e| e.path().join("bin")).filter(|p| p.join("postgres").exists()).collect()
        })
        .unwrap_or_default();
    found.sort();
    found.pop().unwrap_or_else(|| {
        panic!(
            "PostgreSQL's server binaries are missing (no /usr/lib/postgresql/*/bin/postgres): install them \
             (`apt-get install -y postgresql`) or point OD_PG_BINDIR at them"
        )
    })
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// `cmd` as the `postgres` user when we are root (PostgreSQL refuses to run as root).
fn as_server_user(program: PathBuf) -> Command {
    if is_root() {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=postgres", "--regid=postgres", "--init-groups"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

/// The postmaster on `port` over `dir/data`, its socket in `dir`, appending to `dir/server.log`.
fn spawn_postgres(bin: &std::path::Path, dir: &std::path::Path, port: u16, extra: &[String]) -> Child {
    let log = std::fs::OpenOptions::new().append(true).open(dir.join("server.log")).unwrap();
    as_server_user(bin.join("postgres"))
        .arg("-D")
        .arg(dir.join("data"))
        .args(["-p", &port.to_string(), "-k"])
        .arg(dir)
        .args([
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            "fsync=on",
            "-c",
            "synchronous_commit=on",
            "-c",
            "max_connections=200",
        ])
        .args(extra.iter().flat_map(|e| ["-c", e.as_str()]))
        .stdout(Stdio::from(log.try_clone().unwrap()))
        .stderr(Stdio::from(log))
        .spawn()
        .unwrap()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl PgServer {
    /// A server of its own (for a test that crashes it).
    pub fn start() -> PgServer {
        Self::start_with(&[], Vec::new())
    }

    /// A server of its own with `ssl=on`, serving `cert_pem` (a chain) and `key_pem`.
    pub fn start_tls(cert_pem: &str, key_pem: &str) -> PgServer {
        let files = [("server.crt", cert_pem), ("server.key", key_pem)];
        Self::start_with(&files, vec!["ssl=on".into()])
    }

    /// A server with `files` written to its folder (mode 0600, the server's own) and `extra`
    /// settings; `server.crt`/`server.key` among the files become its TLS certificate and key.
    fn start_with(files: &[(&str, &str)], mut extra: Vec<String>) -> PgServer {
        use std::os::unix::fs::PermissionsExt;
        let bin = bindir();
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
            let setting = match *name {
                "server.crt" => "ssl_cert_file",
                "server.key" => "ssl_key_file",
                _ => continue,
            };
            extra.push(format!("{setting}={}", path.display()));
        }
        if is_root() {
            let out = Command::new("chown").args(["-R", "postgres:postgres"]).arg(dir.path()).output().unwrap();
            assert!(out.status.success(), "chown: {}", String::from_utf8_lossy(&out.stderr));
        }
        let data = dir.path().join("data");
        let out = as_server_user(bin.join("initdb"))
            .args(["--auth=trust", "--username=od", "--encoding=UTF8", "--no-sync", "-D"])
            .arg(&data)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "initdb failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if extra.iter().any(|e| e == "ssl=on") {
            // Role `tlsonly` may only connect over TLS (for libpq's `allow`, which tries plain first).
            let hba = data.join("pg_hba.conf");
            let rest = std::fs::read_to_string(&hba).unwrap();
            std::fs::write(&hba, format!("hostnossl all tlsonly 127.0.0.1/32 reject\n{rest}")).unwrap();
        }
        let port = free_port();
        std::fs::File::create(dir.path().join("server.log")).unwrap();
        let child = spawn_postgres(&bin, dir.path(), port, &extra);
        let s = PgServer { port, dir, child: Mutex::new(child), bin, extra };
        s.wait_ready();
        s
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ok = Command::new(self.bin.join("pg_isready"))
                .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", "od"])
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                return;
            }
            if let Ok(Some(status)) = self.child.lock().unwrap().try_wait() {
                panic!("postgres exited ({status}): {}", self.log());
            }
            assert!(Instant::now() < deadline, "postgres did not start in 30 s: {}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    /// The URL of database `db` on this server.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://od@127.0.0.1:{}/{db}", self.port)
    }

    /// A fresh, empty database; its URL.
    pub fn fresh_db(&self) -> String {
        static N: AtomicUsize = AtomicUsize::new(0);
        let name = format!("t{}_{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
        self.psql("postgres", &format!("CREATE DATABASE {name}"));
        self.url(&name)
    }

    /// Runs SQL through psql; panics with its output on failure.
    pub fn psql(&self, db: &str, sql: &str) -> String {
        let out = Command::new(self.bin.join("psql"))
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "od",
                "-d",
                db,
                "-v",
                "ON_ERROR_STOP=1",
                "-Atc",
                sql,
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "psql {sql}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Stops the server at once (SIGKILL), keeps it down for `down`, then starts it again on the
    /// same port and data: a database outage as its clients see it.
    pub fn down_for(&self, down: Duration) {
        let mut child = self.child.lock().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
            assert!(Instant::now() < deadline, "the old server still listens");
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(down);
        let _ = std::fs::remove_file(self.dir.path().join("data").join("postmaster.pid"));
        *child = spawn_postgres(&self.bin, self.dir.path(), self.port, &self.extra);
        drop(child);
        self.wait_ready();
    }

    /// Stops the server at once (SIGKILL: no shutdown checkpoint) and starts it again on the same
    /// port and data: what a crash of the database does to its clients.
    pub fn crash_and_restart(&self) {
        let mut child = self.child.lock().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        // The postmaster's children notice its death and exit; wait for the port to free.
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
            assert!(Instant::now() < deadline, "the old server still listens");
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = std::fs::remove_file(self.dir.path().join("data").join("postmaster.pid"));
        *child = spawn_postgres(&self.bin, self.dir.path(), self.port, &self.extra);
        drop(child);
        self.wait_ready();
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        let mut child = self.child.lock().unwrap();
        // SIGINT: PostgreSQL's fast shutdown (ends sessions, then exits).
        let _ = Command::new("kill").args(["-INT", &child.id().to_string()]).status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// The test binary's server (started on first use, stopped when no test holds it).
pub fn server() -> Arc<PgServer> {
    static SHARED: Mutex<Weak<PgServer>> = Mutex::new(Weak::new());
    let mut g = SHARED.lock().unwrap();
    if let Some(s) = g.upgrade() {
        return s;
    }
    let s = Arc::new(PgServer::start());
    *g = Arc::downgrade(&s);
    s
}

/// The binary's TLS server and what a test needs to reach it: the CA that signed its certificate
/// (for `localhost` and 127.0.0.1) as a PEM file, and another CA's file (one that did not). Its
/// role `tlsonly` (a superuser) is refused without TLS (`pg_hba.conf`).
pub struct TlsPg {
    pub server: PgServer,
    pub ca_file: PathBuf,
    pub other_ca_file: PathBuf,
    _files: tempfile::TempDir,
}

impl TlsPg {
    /// A fresh database's URL with `query` (e.g. `sslmode=verify-full&sslrootcert=…`), its host
    /// `host` (the server listens on 127.0.0.1 whatever the name: `hostaddr`).
    pub fn fresh_url(&self, host: &str, query: &str) -> String {
        let url = self.server.fresh_db();
        let db = url.rsplit('/').next().unwrap();
        let addr = if host == "127.0.0.1" { String::new() } else { "&hostaddr=127.0.0.1".into() };
        format!("postgres://od@{host}:{}/{db}?{query}{addr}", self.server.port)
    }
}

/// The test binary's one TLS server (`ssl=on`), started on first use, stopped when no test holds it.
pub fn tls_server() -> Arc<TlsPg> {
    static SHARED: Mutex<Weak<TlsPg>> = Mutex::new(Weak::new());
    let mut g = SHARED.lock().unwrap();
    if let Some(s) = g.upgrade() {
        return s;
    }
    // The tests' one CA maker (tests/common/tls.rs): a certificate for `localhost` and 127.0.0.1.
    use super::tls::{Flaw, TestCa};
    let files = tempfile::tempdir().unwrap();
    let (ca, other) = (TestCa::new(files.path(), "od"), TestCa::new(files.path(), "another"));
    let cert = ca.server_cert(files.path(), "pg", Flaw::None);
    let (ca_file, other_ca_file) = (ca.pem_path.clone(), other.pem_path.clone());
    let server = PgServer::start_tls(&cert.cert_pem, &cert.key_pem);
    server.psql("postgres", "CREATE ROLE tlsonly LOGIN SUPERUSER");
    let s = Arc::new(TlsPg { server, ca_file, other_ca_file, _files: files });
    *g = Arc::downgrade(&s);
    s
}
