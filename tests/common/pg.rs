//! A private PostgreSQL server for tests: `initdb` into a temporary folder and `postgres` on a free
//! loopback port, from the machine's own packages (`/usr/lib/postgresql/<v>/bin`, or
//! `OD_PG_BINDIR`). Run as root (CI), the server runs as the `postgres` user (PostgreSQL refuses
//! root). Missing binaries fail the test, naming the fix: a PostgreSQL test never passes by
//! skipping. One server per test binary while any test holds it; each test gets its own database.

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
fn spawn_postgres(bin: &std::path::Path, dir: &std::path::Path, port: u16) -> Child {
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
        let bin = bindir();
        let dir = tempfile::tempdir().unwrap();
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
        let port = free_port();
        std::fs::File::create(dir.path().join("server.log")).unwrap();
        let child = spawn_postgres(&bin, dir.path(), port);
        let s = PgServer { port, dir, child: Mutex::new(child), bin };
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
        *child = spawn_postgres(&self.bin, self.dir.path(), self.port);
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
        *child = spawn_postgres(&self.bin, self.dir.path(), self.port);
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
