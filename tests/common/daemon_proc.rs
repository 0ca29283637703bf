//! An `od daemon start --foreground` child process for tests that need a real process (to kill it,
//! or to run several): started on port 0 with the given flags and environment, its first stdout
//! line read for the URL and the rest drained (a full pipe would stall it), its stderr in
//! `<data>.stderr` (shown if the start fails), killed when dropped.

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Daemon {
    pub child: Child,
    pub url: String,
    pub data: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Starts a daemon on `data` with `args` (e.g. `--store <url>`) and `env`; the environment's own
/// daemon and store settings are cleared first.
pub fn start(data: &Path, args: &[&str], env: &[(&str, String)]) -> Daemon {
    let mut c = Command::new(super::harness::OD);
    c.args(["daemon", "start", "--foreground", "--port", "0", "--json", "--data-dir"]).arg(data).args(args);
    // What the daemon trusts comes from `env` only (a test names its own CA there).
    for k in ["OD_DAEMON_URL", "OD_DATABASE_URL", "OD_DAEMON_DB", "SSL_CERT_FILE", "SSL_CERT_DIR", "OD_CA_FILE"] {
        c.env_remove(k);
    }
    c.envs(env.iter().map(|(k, v)| (*k, v.as_str())));
    let mut child =
        c.stdout(Stdio::piped()).stderr(std::fs::File::create(data.with_extension("stderr")).unwrap()).spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
        let log = std::fs::read_to_string(data.with_extension("stderr")).unwrap_or_default();
        panic!("daemon start: {e}: {line:?}; its stderr:\n{log}")
    });
    Daemon { child, url: v["url"].as_str().unwrap().to_string(), data: data.to_path_buf() }
}

/// Calls `f` until it returns a value, failing after `secs` seconds.
pub fn poll<T>(what: &str, secs: u64, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `GET url+path` as JSON; panics with the status and body on an error.
pub fn get(url: &str, path: &str) -> Value {
    match ureq::get(&format!("{url}{path}")).call() {
        Ok(r) => r.into_json().unwrap(),
        Err(ureq::Error::Status(code, r)) => panic!("GET {path}: {code} {}", r.into_string().unwrap_or_default()),
        Err(e) => panic!("GET {path}: {e}"),
    }
}

/// `POST url+path` with a JSON body: the status and the JSON answer (null when none).
pub fn post(url: &str, path: &str, body: Value) -> (u16, Value) {
    match ureq::post(&format!("{url}{path}")).send_json(body) {
        Ok(r) => (r.status(), r.into_json().unwrap_or(Value::Null)),
        Err(ureq::Error::Status(code, r)) => (code, r.into_json().unwrap_or(Value::Null)),
        Err(e) => panic!("POST {path}: {e}"),
    }
}

/// Installs the plugin folder `dir` on the daemon at `url`.
pub fn install(url: &str, dir: &Path) {
    let r = ureq::post(&format!("{url}/api/plugins/install")).send_json(serde_json::json!({ "source": dir })).unwrap();
    let body = r.into_string().unwrap();
    assert!(body.contains("\"success\""), "{body}");
}

/// Starts a run (202) and returns its id.
pub fn start_run(url: &str, body: Value) -> String {
    let (code, v) = post(url, "/api/runs", body);
    assert_eq!(code, 202, "{v}");
    v["runId"].as_str().unwrap().to_string()
}
