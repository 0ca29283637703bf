//! Finding an agent's binary and asking it what it is: the `*_BIN` override, then PATH and the
//! usual install folders; `--version` (parsed), `--help` flag probing, the auth probe and the model
//! list — each probe bounded in time ([`crate::limits::AGENT_PROBE_TIMEOUT_MS`]) in its own process
//! group, killed whole when it overruns. Results are cached per binary path and modification time
//! for [`crate::limits::AGENT_PROBE_CACHE_TTL_MS`] of the injected clock. What is wrong comes back
//! as typed diagnostics, each with its fix.

use serde::Serialize;
use std::collections::{BTreeSet, HashMap};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use super::catalog::{AgentDef, ModelOption};
use crate::clock::Clock;

/// The environment detection reads (the daemon's own, or a test's).
#[derive(Debug, Clone, Default)]
pub struct ProbeEnv {
    pub vars: HashMap<String, String>,
}

impl ProbeEnv {
    pub fn from_process() -> Self {
        ProbeEnv { vars: std::env::vars().collect() }
    }

    /// A digest of every variable, in name order.
    fn digest(&self) -> [u8; 32] {
        let mut names: Vec<&String> = self.vars.keys().collect();
        names.sort();
        let mut h = blake3::Hasher::new();
        for k in names {
            for part in [k.as_bytes(), b"\0", self.vars[k].as_bytes(), b"\0"] {
                h.update(part);
            }
        }
        *h.finalize().as_bytes()
    }

    fn get(&self, k: &str) -> Option<&str> {
        self.vars.get(k).map(String::as_str).filter(|v| !v.trim().is_empty())
    }

    /// The folders searched, in order: PATH, then the usual install folders below HOME and
    /// `/usr/local/bin`, `/opt/homebrew/bin` (each once).
    pub fn search_dirs(&self) -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> = self.get("PATH").map(|p| std::env::split_paths(p).collect()).unwrap_or_default();
        if let Some(home) = self.get("HOME").map(PathBuf::from) {
            for d in [".local/bin", ".npm-global/bin", ".bun/bin", ".volta/bin", ".cargo/bin", ".opencode/bin"] {
                dirs.push(home.join(d));
            }
            // nvm: every installed Node's bin folder, newest name last.
            if let Ok(rd) = std::fs::read_dir(home.join(".nvm/versions/node")) {
                let mut vs: Vec<PathBuf> = rd.filter_map(Result::ok).map(|e| e.path().join("bin")).collect();
                vs.sort();
                dirs.extend(vs.into_iter().rev());
            }
        }
        dirs.extend(["/usr/local/bin", "/opt/homebrew/bin"].map(PathBuf::from));
        let mut seen = BTreeSet::new();
        dirs.retain(|d| !d.as_os_str().is_empty() && seen.insert(d.clone()));
        dirs
    }
}

/// A typed diagnostic: why the agent is unavailable or only partly usable, and the fix.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Diagnostic {
    /// `not-installed`, `not-executable`, `version-failed`, `auth-missing`, `probe-timeout`,
    /// `protocol-unsupported`.
    pub reason: &'static str,
    /// `error` (unavailable) or `warning`.
    pub severity: &'static str,
    pub message: String,
    /// What to do about it (a command to run, a variable to set).
    pub fix: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub searched_dirs: Vec<String>,
}

/// What detection found for one agent.
#[derive(Debug, Clone, PartialEq)]
pub struct Detected {
    pub available: bool,
    pub path: Option<PathBuf>,
    pub version: Option<String>,
    /// `ok`, `missing` or `unknown`.
    pub auth_status: &'static str,
    pub auth_message: Option<String>,
    /// The CLI's own list when it has one that answered, else the catalog's.
    pub models: Vec<ModelOption>,
    /// `live` or `fallback`.
    pub models_source: &'static str,
    pub caps: BTreeSet<String>,
    pub diagnostics: Vec<Diagnostic>,
}

/// Where the binary is, or why there is none.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolved {
    Found(PathBuf),
    /// A file of that name that cannot be run.
    NotExecutable(PathBuf),
    /// The `*_BIN` variable names a file that is not there.
    BadOverride {
        var: String,
        path: PathBuf,
    },
    NotFound {
        searched: Vec<PathBuf>,
    },
}

/// Resolves `def`'s binary: `binEnv` first (a path, or a name looked up like `bin`), then `bin`
/// and its fallback names in each search folder.
pub fn resolve(def: &AgentDef, env: &ProbeEnv) -> Resolved {
    let dirs = env.search_dirs();
    if let Some((var, val)) = def.bin_env.as_deref().and_then(|v| env.get(v).map(|val| (v, val))) {
        let p = PathBuf::from(val);
        if p.is_absolute() || val.contains('/') {
            return match file_state(&p) {
                Some(true) => Resolved::Found(p),
                Some(false) => Resolved::NotExecutable(p),
                None => Resolved::BadOverride { var: var.into(), path: p },
            };
        }
        return find(&[val.to_string()], &dirs).unwrap_or(Resolved::BadOverride { var: var.into(), path: p });
    }
    let mut names: Vec<String> = def.bin.iter().cloned().collect();
    names.extend(def.fallback_bins.iter().cloned());
    find(&names, &dirs).unwrap_or(Resolved::NotFound { searched: dirs })
}

/// The first executable of `names` (in order) in `dirs`; a non-executable match is remembered.
fn find(names: &[String], dirs: &[PathBuf]) -> Option<Resolved> {
    let mut not_exec = None;
    for name in names {
        for d in dirs {
            let p = d.join(name);
            match file_state(&p) {
                Some(true) => return Some(Resolved::Found(p)),
                Some(false) if not_exec.is_none() => not_exec = Some(p),
                _ => {}
            }
        }
    }
    not_exec.map(Resolved::NotExecutable)
}

/// `Some(executable?)` for a regular file, `None` when absent.
fn file_state(p: &Path) -> Option<bool> {
    let m = std::fs::metadata(p).ok().filter(|m| m.is_file())?;
    Some(m.permissions().mode() & 0o111 != 0)
}

/// What one probe process did.
#[derive(Debug)]
pub enum ProbeOut {
    Exited { code: Option<i32>, stdout: String, stderr: String },
    TimedOut,
    Failed(String),
}

/// Runs `path args` with stdin closed, in the system's temp folder (a probe writes nothing where
/// the daemon runs), in its own process group, for at most `timeout`; an overrun kills the whole
/// group.
pub fn run_probe(path: &Path, args: &[String], env: &ProbeEnv, timeout: Duration) -> ProbeOut {
    use std::os::unix::process::CommandExt;
    let mut cmd = std::process::Command::new(path);
    cmd.args(args)
        .current_dir(std::env::temp_dir())
        .env_clear()
        .envs(&env.vars)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0);
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return ProbeOut::Failed(e.to_string()),
    };
    let pid = child.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(timeout) {
        Ok(Ok(out)) => ProbeOut::Exited { code: out.status.code(), stdout: cap(&out.stdout), stderr: cap(&out.stderr) },
        Ok(Err(e)) => ProbeOut::Failed(e.to_string()),
        Err(_) => {
            // SAFETY: kill(2) on the probe's own process group; no memory is touched.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
            let _ = rx.recv_timeout(Duration::from_secs(2));
            ProbeOut::TimedOut
        }
    }
}

fn cap(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(&b[..b.len().min(crate::limits::AGENT_PROBE_OUTPUT_BYTES)]);
    s.into_owned()
}

/// The version in a `--version` answer: the first word made of digits and dots (with at least one
/// dot), with any `v` before it dropped; else the first line.
pub fn parse_version(out: &str) -> Option<String> {
    for word in out.split(|c: char| c.is_whitespace() || c == '(' || c == ')' || c == ',') {
        let w = word.trim_start_matches('v');
        let head: String = w.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '.' || *c == '-').collect();
        if head.starts_with(|c: char| c.is_ascii_digit()) && head.contains('.') {
            return Some(head);
        }
    }
    out.lines().map(str::trim).find(|l| !l.is_empty()).map(|l| l.chars().take(80).collect())
}

/// Detects one agent (no cache; see [`Detector`]).
pub fn detect_uncached(def: &AgentDef, env: &ProbeEnv, timeout: Duration) -> Detected {
    let mut d = Detected {
        available: false,
        path: None,
        version: None,
        auth_status: "unknown",
        auth_message: None,
        models: def.models.clone(),
        models_source: "fallback",
        caps: BTreeSet::new(),
        diagnostics: Vec::new(),
    };
    let install = if def.install.is_empty() { def.install_url.clone() } else { def.install.clone() };
    let path = match resolve(def, env) {
        Resolved::Found(p) => p,
        other => {
            d.diagnostics.push(not_found(def, &install, &other));
            if let Resolved::NotExecutable(p) = other {
                d.path = Some(p);
            }
            return d;
        }
    };
    d.path = Some(path.clone());
    if !def.version_args.is_empty() {
        match version(def, &path, env, timeout, &install) {
            Ok(v) => d.version = v,
            Err(g) => {
                d.diagnostics.push(g);
                return d;
            }
        }
    }
    d.available = true;
    if !def.help_args.is_empty() {
        if let ProbeOut::Exited { stdout, stderr, .. } = run_probe(&path, &def.help_args, env, timeout) {
            for (flag, cap) in &def.capability_flags {
                if stdout.contains(flag.as_str()) || stderr.contains(flag.as_str()) {
                    d.caps.insert(cap.clone());
                }
            }
        }
    }
    auth(def, &path, env, timeout, &mut d);
    if let Some(live) = live_models(def, &path, env, timeout) {
        d.models = live;
        d.models_source = "live";
    }
    d
}

/// Why a binary that did not resolve cannot be used, and how to fix it.
fn not_found(def: &AgentDef, install: &str, r: &Resolved) -> Diagnostic {
    match r {
        // (`Found` never comes here: the caller uses the binary.)
        Resolved::Found(p) | Resolved::NotExecutable(p) => diag(
            "not-executable",
            "error",
            format!("{} is not executable", p.display()),
            format!("chmod +x {} (or reinstall: {install})", p.display()),
        ),
        Resolved::BadOverride { var, path } => diag(
            "not-installed",
            "error",
            format!("{var} names {}, which is not there", path.display()),
            format!("point {var} at the {} binary, or unset it", def.bin.as_deref().unwrap_or(&def.id)),
        ),
        Resolved::NotFound { searched } => {
            let names = std::iter::once(def.bin.clone().unwrap_or_default())
                .chain(def.fallback_bins.iter().cloned())
                .collect::<Vec<_>>()
                .join(" or ");
            let var = def.bin_env.as_deref().map(|v| format!(", or set {v} to its path")).unwrap_or_default();
            let mut g = diag(
                "not-installed",
                "error",
                format!("{names} is not on PATH nor in the usual install folders"),
                format!("{install}{var}"),
            );
            g.searched_dirs = searched.iter().map(|p| p.display().to_string()).collect();
            g
        }
    }
}

/// The binary's version (`version_args`); a probe that times out, fails or cannot start is the
/// diagnostic that makes the agent unavailable.
fn version(
    def: &AgentDef,
    path: &Path,
    env: &ProbeEnv,
    timeout: Duration,
    install: &str,
) -> Result<Option<String>, Diagnostic> {
    let args = def.version_args.join(" ");
    match run_probe(path, &def.version_args, env, timeout) {
        ProbeOut::Exited { code: Some(0), stdout, stderr } => {
            Ok(parse_version(&stdout).or_else(|| parse_version(&stderr)))
        }
        ProbeOut::TimedOut => Err(diag(
            "probe-timeout",
            "error",
            format!("`{} {args}` did not answer within {} ms", path.display(), timeout.as_millis()),
            format!("run `{} {args}` by hand to see what it waits for; reinstall: {install}", path.display()),
        )),
        ProbeOut::Exited { code, stderr, stdout } => {
            let tail: String = if stderr.trim().is_empty() { stdout } else { stderr };
            let code = code.map_or("a signal".to_string(), |c| format!("exit code {c}"));
            let mut g = diag(
                "version-failed",
                "error",
                format!("`{} {args}` failed with {code}", path.display()),
                format!("reinstall: {install}"),
            );
            g.message.push_str(&format!(": {}", tail.trim().chars().take(200).collect::<String>()));
            Err(g)
        }
        ProbeOut::Failed(e) => Err(diag(
            "not-executable",
            "error",
            format!("{} could not be started: {e}", path.display()),
            format!("reinstall: {install}"),
        )),
    }
}

/// The CLI's own model list (`models_args`: the first word of each line), when it gives one.
fn live_models(def: &AgentDef, path: &Path, env: &ProbeEnv, timeout: Duration) -> Option<Vec<ModelOption>> {
    if def.models_args.is_empty() {
        return None;
    }
    let ProbeOut::Exited { code: Some(0), stdout, .. } = run_probe(path, &def.models_args, env, timeout) else {
        return None;
    };
    let live: Vec<ModelOption> = stdout
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|id| !id.is_empty() && !id.ends_with(':'))
        .take(crate::limits::MAX_AGENT_MODELS)
        .map(|id| ModelOption { id: id.to_string(), label: id.to_string() })
        .collect();
    (!live.is_empty()).then_some(live)
}

fn auth(def: &AgentDef, path: &Path, env: &ProbeEnv, timeout: Duration, d: &mut Detected) {
    let Some(a) = &def.auth else { return };
    if let Some(var) = a.env.iter().find(|v| env.get(v).is_some()) {
        d.auth_status = "ok";
        d.auth_message = Some(format!("{var} is set"));
        return;
    }
    if a.args.is_empty() {
        d.auth_message = Some(format!("none of {} is set; it may be signed in another way", a.env.join(", ")));
        return;
    }
    match run_probe(path, &a.args, env, timeout) {
        ProbeOut::Exited { code: Some(0), .. } => {
            d.auth_status = "ok";
            d.auth_message = Some(format!("`{}` says signed in", a.args.join(" ")));
        }
        ProbeOut::Exited { .. } => {
            d.auth_status = "missing";
            d.auth_message = Some(format!("`{}` says not signed in", a.args.join(" ")));
            let vars = if a.env.is_empty() { String::new() } else { format!(" (or set {})", a.env.join(" or ")) };
            d.diagnostics.push(diag(
                "auth-missing",
                "warning",
                format!("{} is installed but not signed in", def.name),
                format!("{}{vars}", a.login),
            ));
        }
        ProbeOut::TimedOut | ProbeOut::Failed(_) => {
            d.auth_message = Some(format!("`{}` did not answer", a.args.join(" ")));
        }
    }
}

fn diag(reason: &'static str, severity: &'static str, message: String, fix: String) -> Diagnostic {
    Diagnostic { reason, severity, message, fix, searched_dirs: Vec::new() }
}

/// Cached detection: per agent id, binary path and its modification time, for the TTL.
#[derive(Default)]
pub struct Detector {
    cache: Mutex<HashMap<String, (CacheKey, i64, Detected)>>,
}

#[derive(Debug, Clone, PartialEq)]
struct CacheKey {
    resolved: Resolved,
    mtime: Option<std::time::SystemTime>,
    /// The entry itself (an edited catalog file probes again).
    def: String,
    /// The environment probed in (its home, config files and variables decide what a CLI says:
    /// two daemons in one process, or a changed variable, never share a detection).
    env: [u8; 32],
}

impl Detector {
    /// The detector the daemon shares.
    pub fn global() -> &'static Detector {
        static D: std::sync::OnceLock<Detector> = std::sync::OnceLock::new();
        D.get_or_init(Detector::default)
    }

    /// Detects `def`, from the cache when the same binary (path and modification time) was probed
    /// less than the TTL ago by `clock`.
    pub fn detect(&self, def: &AgentDef, env: &ProbeEnv, clock: &dyn Clock) -> Detected {
        let resolved = resolve(def, env);
        let mtime = match &resolved {
            Resolved::Found(p) | Resolved::NotExecutable(p) => std::fs::metadata(p).and_then(|m| m.modified()).ok(),
            _ => None,
        };
        let key = CacheKey { resolved, mtime, def: format!("{def:?}"), env: env.digest() };
        let now = clock.now_ms();
        if let Some((k, at, d)) = self.cache.lock().expect("agent cache").get(&def.id) {
            if *k == key && now - at < crate::limits::AGENT_PROBE_CACHE_TTL_MS {
                return d.clone();
            }
        }
        let d = detect_uncached(def, env, Duration::from_millis(crate::limits::AGENT_PROBE_TIMEOUT_MS));
        let mut cache = self.cache.lock().expect("agent cache");
        if cache.len() >= crate::limits::MAX_AGENT_CATALOG_ENTRIES && !cache.contains_key(&def.id) {
            cache.clear();
        }
        cache.insert(def.id.clone(), (key, now, d.clone()));
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::catalog::Catalog;
    use crate::clock::ManualClock;

    fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    fn env_with(dir: &Path) -> ProbeEnv {
        let mut vars = HashMap::new();
        vars.insert("PATH".to_string(), format!("{}:/usr/bin:/bin", dir.display()));
        vars.insert("HOME".to_string(), dir.join("home").display().to_string());
        ProbeEnv { vars }
    }

    #[test]
    fn versions_are_read_from_what_clis_print() {
        assert_eq!(parse_version("2.1.197 (Claude Code)\n").as_deref(), Some("2.1.197"));
        assert_eq!(parse_version("codex-cli 0.171.0\n").as_deref(), Some("0.171.0"));
        assert_eq!(parse_version("v1.18.33").as_deref(), Some("1.18.33"));
        assert_eq!(parse_version("2026.01.07-abc123").as_deref(), Some("2026.01.07-abc123"));
        assert_eq!(parse_version("\n").as_deref(), None);
    }

    #[test]
    fn the_cache_holds_for_its_ttl_and_a_changed_binary_is_probed_again() {
        let tmp = tempfile::tempdir().unwrap();
        let count = tmp.path().join("count");
        let body = format!("echo x >> {}\necho '9.8.7 (Claude Code)'", count.display());
        script(tmp.path(), "claude", &body);
        let env = env_with(tmp.path());
        let cat = Catalog::built_in();
        let def = cat.get("claude").unwrap();
        let det = Detector::default();
        let clock = ManualClock::at(1_000_000);
        let runs = || std::fs::read_to_string(&count).unwrap_or_default().lines().count();
        let d = det.detect(def, &env, &clock);
        assert_eq!((d.available, d.version.as_deref()), (true, Some("9.8.7")), "{d:?}");
        let first = runs();
        assert!(first >= 1);
        clock.advance(crate::limits::AGENT_PROBE_CACHE_TTL_MS - 1);
        assert_eq!(det.detect(def, &env, &clock), d);
        assert_eq!(runs(), first, "a cached detection runs nothing");
        clock.advance(1);
        det.detect(def, &env, &clock);
        assert!(runs() > first, "past the TTL it probes again");
        let seen = runs();
        let mut other = env.clone();
        other.vars.insert("OPENCODE_CONFIG_CONTENT".into(), "{}".into());
        det.detect(def, &other, &clock);
        assert!(runs() > seen, "another environment (another daemon's, a changed variable) probes again");
    }

    #[test]
    fn a_hung_probe_is_killed_at_its_bound() {
        let tmp = tempfile::tempdir().unwrap();
        let p = script(tmp.path(), "hang", "sleep 30 & wait");
        let t = std::time::Instant::now();
        let out = run_probe(&p, &[], &env_with(tmp.path()), Duration::from_millis(300));
        assert!(matches!(out, ProbeOut::TimedOut), "{out:?}");
        assert!(t.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn the_bin_override_wins_and_a_bad_one_is_named() {
        let tmp = tempfile::tempdir().unwrap();
        script(tmp.path(), "claude", "echo 1.0.0");
        let other = tmp.path().join("other");
        std::fs::create_dir(&other).unwrap();
        let mine = script(&other, "my-claude", "echo 2.0.0");
        let cat = Catalog::built_in();
        let def = cat.get("claude").unwrap();
        let mut env = env_with(tmp.path());
        env.vars.insert("CLAUDE_BIN".into(), mine.display().to_string());
        assert_eq!(resolve(def, &env), Resolved::Found(mine));
        env.vars.insert("CLAUDE_BIN".into(), "/nowhere/claude".into());
        let d = detect_uncached(def, &env, Duration::from_secs(5));
        assert_eq!(d.diagnostics[0].reason, "not-installed");
        assert!(d.diagnostics[0].message.contains("CLAUDE_BIN"), "{d:?}");
    }
}
