//! The connector catalog: which providers od can connect to, their OAuth 2.0 endpoints, and the
//! tools (`allowedToolNames`) a plugin may call through each.
//!
//! The catalog is od's built-in definitions (`src/connectors/builtin.json`: GitHub, Slack, Notion, Figma,
//! Vercel, with their public endpoints) merged with the user's `connectors.json` in the data dir (or
//! the file `OD_CONNECTORS_FILE` names): an entry there overrides the fields it names of a built-in
//! connector, or defines a new one in full. A connector without a `clientId` is listed but
//! `unavailable`. Client secrets are never written in the file: `clientSecretEnv` names the
//! environment variable that holds one (PKCE public clients need none).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::limits::MAX_CONNECTOR_CATALOG_BYTES;

const BUILTIN: &str = include_str!("builtin.json");

/// One tool of a connector: an HTTP request to its API.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolDef {
    /// GET, POST, PUT, PATCH or DELETE.
    pub method: String,
    /// Below `apiBaseUrl`; `{name}` segments are filled from the input (and removed from it).
    pub path: String,
    #[serde(default)]
    pub description: String,
}

/// Where the connected account's label is read after connecting.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AccountDef {
    pub path: String,
    /// A dotted path into the JSON answer (`user.username`).
    pub label_field: String,
}

/// A connector definition (`ConnectorCatalogDefinition`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConnectorDef {
    #[serde(default)]
    pub id: String,
    pub name: String,
    pub authorize_url: String,
    pub token_url: String,
    pub api_base_url: String,
    #[serde(default)]
    pub client_id: String,
    /// The environment variable holding the client secret (empty: a public PKCE client).
    #[serde(default)]
    pub client_secret_env: String,
    #[serde(default)]
    pub scopes: Vec<String>,
    /// Headers every API call sends (`Notion-Version`, `Accept`).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    #[serde(default)]
    pub account: Option<AccountDef>,
    pub tools: BTreeMap<String, ToolDef>,
    /// The RFC 8707 resource the token is asked for (an MCP server's URL; empty: none).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource: String,
}

impl ConnectorDef {
    /// The tool names a plugin may list in `od.connectors.*[].tools`.
    pub fn allowed_tool_names(&self) -> Vec<String> {
        self.tools.keys().cloned().collect()
    }

    /// Why it cannot be connected yet (None: it can).
    pub fn unavailable_reason(&self) -> Option<String> {
        self.client_id
            .is_empty()
            .then(|| format!("no clientId configured for {:?} (set it in connectors.json)", self.id))
    }

    /// The client secret, read from its environment variable when one is named.
    pub fn client_secret(&self) -> Option<String> {
        (self.client_secret_env.starts_with(CLIENT_SECRET_ENV_PREFIX))
            .then(|| std::env::var(&self.client_secret_env).ok())
            .flatten()
            .filter(|s| !s.is_empty())
    }
}

/// Why the catalog could not be read: the file and the field, so the user can mend it.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("{file}: {field}: {message}")]
    Invalid { file: String, field: String, message: String },
}

/// The merged catalog, by id.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    pub connectors: BTreeMap<String, ConnectorDef>,
}

/// Where the user's catalog file is.
pub fn catalog_path(data_dir: &Path) -> PathBuf {
    match std::env::var_os("OD_CONNECTORS_FILE") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => data_dir.join("connectors.json"),
    }
}

fn invalid(file: &str, field: impl Into<String>, message: impl Into<String>) -> CatalogError {
    CatalogError::Invalid { file: file.into(), field: field.into(), message: message.into() }
}

/// A connector id: lowercase letters, digits, `-` and `_`, starting with a letter or digit (the
/// form `connector:<id>` capabilities take).
pub fn valid_id(id: &str) -> bool {
    let b = id.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && b[0].is_ascii_alphanumeric()
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-' || *c == b'_')
}

/// The prefix every `clientSecretEnv` must carry: a catalog file names which variable od hands a
/// provider, so it must not be able to name the daemon's others (`OD_API_TOKEN`, `AWS_*`, …).
pub const CLIENT_SECRET_ENV_PREFIX: &str = "OD_CONNECTOR_";

fn check(file: &str, d: &ConnectorDef) -> Result<(), CatalogError> {
    let at = |f: &str| format!("connectors.{}.{f}", d.id);
    for (field, url) in
        [("authorizeUrl", &d.authorize_url), ("tokenUrl", &d.token_url), ("apiBaseUrl", &d.api_base_url)]
    {
        // The outbound URL rule (`net/url_rule.rs`): a URL, https (or http to loopback), no
        // userinfo (`http://localhost:1@evil/` is not loopback), never od's own API.
        if let Err(e) = crate::net::check_url(url) {
            return Err(invalid(file, at(field), e.to_string()));
        }
    }
    let env = &d.client_secret_env;
    let env_ok = env.is_empty()
        || (env.len() > CLIENT_SECRET_ENV_PREFIX.len()
            && env.starts_with(CLIENT_SECRET_ENV_PREFIX)
            && env.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_'));
    if !env_ok {
        let msg = format!(
            "{env:?}: a client secret is read only from a variable named {CLIENT_SECRET_ENV_PREFIX}<NAME> (capitals, digits, _)"
        );
        return Err(invalid(file, at("clientSecretEnv"), msg));
    }
    for (name, t) in &d.tools {
        if !matches!(t.method.as_str(), "GET" | "POST" | "PUT" | "PATCH" | "DELETE") {
            return Err(invalid(
                file,
                at(&format!("tools.{name}.method")),
                format!("{:?} is not GET, POST, PUT, PATCH or DELETE", t.method),
            ));
        }
        if !t.path.starts_with('/') || t.path.contains("..") {
            return Err(invalid(file, at(&format!("tools.{name}.path")), "a path starts with / and has no .."));
        }
    }
    if let Some(a) = &d.account {
        if !a.path.starts_with('/') {
            return Err(invalid(file, at("account.path"), "a path starts with /"));
        }
    }
    for (k, v) in &d.headers {
        if axum::http::HeaderName::from_bytes(k.as_bytes()).is_err() || axum::http::HeaderValue::from_str(v).is_err() {
            return Err(invalid(file, at(&format!("headers.{k}")), "not a valid HTTP header"));
        }
    }
    Ok(())
}

/// Merges `over` (a user entry) onto `base` field by field (objects recursively).
fn merge(base: &mut Value, over: &Value) {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                merge(b.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (b, o) => *b = o.clone(),
    }
}

fn entries(file: &str, v: &Value) -> Result<Map<String, Value>, CatalogError> {
    match &v["connectors"] {
        Value::Object(m) => Ok(m.clone()),
        Value::Null => Ok(Map::new()),
        _ => Err(invalid(file, "connectors", "expected an object of connector definitions by id")),
    }
}

/// What identifies one version of the catalog file: device, inode, size, mtime and ctime (ns).
type Stamp = (u64, u64, u64, i64, i64, i64, i64);

/// The last catalog parsed, with the file and version it came from.
static CACHE: Mutex<Option<(PathBuf, Stamp, Catalog)>> = Mutex::new(None);

/// How old (mtime and ctime, in seconds) the file must be before its parsed catalog is reused.
const CATALOG_SETTLED_SECS: i64 = 2;

/// The files parsed (tests check that an unchanged file is not parsed again).
#[cfg(test)]
static PARSED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

type ReadRest = Box<dyn FnOnce() -> Result<Vec<u8>, CatalogError>>;

/// Opens the user's file (None: there is none) without blocking, checks that it is a regular file
/// within the size bound, and returns its stamp and a reader of its bytes (bounded again).
fn open_bounded(path: &Path, file: &str) -> Result<Option<(Stamp, ReadRest)>, CatalogError> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let opened = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC).open(path);
    let f = match opened {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(invalid(file, "(file)", e.to_string())),
    };
    let m = f.metadata().map_err(|e| invalid(file, "(file)", e.to_string()))?;
    if !m.file_type().is_file() {
        return Err(invalid(file, "(file)", "not a regular file"));
    }
    let max = MAX_CONNECTOR_CATALOG_BYTES as u64;
    if m.len() > max {
        return Err(invalid(file, "(file)", format!("{} bytes, larger than {max} bytes", m.len())));
    }
    let stamp = (m.dev(), m.ino(), m.len(), m.mtime(), m.mtime_nsec(), m.ctime(), m.ctime_nsec());
    let file = file.to_string();
    let read: ReadRest = Box::new(move || {
        let mut bytes = Vec::new();
        (&f).take(max + 1).read_to_end(&mut bytes).map_err(|e| invalid(&file, "(file)", e.to_string()))?;
        if bytes.len() as u64 > max {
            return Err(invalid(&file, "(file)", format!("larger than {max} bytes")));
        }
        Ok(bytes)
    });
    Ok(Some((stamp, read)))
}

/// The built-in catalog merged with the user's file's `bytes` (None: no file).
fn build(file: &str, bytes: Option<&[u8]>) -> Result<Catalog, CatalogError> {
    let builtin: Value = serde_json::from_str(BUILTIN).expect("builtin.json is valid JSON");
    let mut merged = entries("builtin.json", &builtin)?;
    if let Some(bytes) = bytes {
        let user: Value = serde_json::from_slice(bytes).map_err(|e| invalid(file, "(file)", e.to_string()))?;
        for (id, entry) in entries(file, &user)? {
            if !valid_id(&id) {
                return Err(invalid(file, format!("connectors.{id}"), "an id is lowercase letters, digits, - and _"));
            }
            if !entry.is_object() {
                return Err(invalid(file, format!("connectors.{id}"), "expected an object"));
            }
            merge(merged.entry(id).or_insert(Value::Object(Map::new())), &entry);
        }
    }
    let mut connectors = BTreeMap::new();
    for (id, v) in merged {
        let mut d: ConnectorDef =
            serde_json::from_value(v).map_err(|e| invalid(file, format!("connectors.{id}"), e.to_string()))?;
        d.id = id.clone();
        check(file, &d)?;
        connectors.insert(id, d);
    }
    Ok(Catalog { connectors })
}

impl Catalog {
    /// The built-in catalog merged with the user's file (a missing file is an empty one). The file
    /// is opened without blocking (a FIFO is refused, not waited on), must be a regular file no
    /// larger than [`MAX_CONNECTOR_CATALOG_BYTES`] (checked on the open file before a byte is read),
    /// and is parsed again only when it changed (same inode, size, mtime and ctime: the last
    /// catalog is reused).
    pub fn load(data_dir: &Path) -> Result<Catalog, CatalogError> {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        Self::load_at(data_dir, now)
    }

    /// [`Catalog::load`] at `now` (Unix seconds: whether the file has settled).
    pub fn load_at(data_dir: &Path, now: i64) -> Result<Catalog, CatalogError> {
        let path = catalog_path(data_dir);
        let file = path.display().to_string();
        let Some((stamp, bytes_of)) = open_bounded(&path, &file)? else { return build(&file, None) };
        let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((p, s, c)) = cache.as_ref() {
            if *p == path && *s == stamp {
                return Ok(c.clone());
            }
        }
        let catalog = build(&file, Some(&bytes_of()?))?;
        #[cfg(test)]
        PARSED.lock().unwrap().push(path.clone());
        // File times are coarse (a few ms): a file changed within the last seconds could change
        // again with the same stamp, so only a settled one is kept (git's "racy" rule).
        if stamp.3 < now - CATALOG_SETTLED_SECS && stamp.5 < now - CATALOG_SETTLED_SECS {
            *cache = Some((path, stamp, catalog.clone()));
        }
        Ok(catalog)
    }

    pub fn get(&self, id: &str) -> Option<&ConnectorDef> {
        self.connectors.get(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unchanged_file_is_not_parsed_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("connectors.json");
        let parsed = || PARSED.lock().unwrap().iter().filter(|p| **p == path).count();
        std::fs::write(&path, r#"{"connectors":{"slack":{"clientId":"one"}}}"#).unwrap();
        // Just written: parsed on every load until it settles.
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
        assert_eq!(Catalog::load_at(dir.path(), now).unwrap().get("slack").unwrap().client_id, "one");
        assert_eq!(Catalog::load_at(dir.path(), now).unwrap().get("slack").unwrap().client_id, "one");
        assert_eq!(parsed(), 2);
        // Settled (a minute later): parsed once, then reused.
        let later = now + 60;
        assert_eq!(Catalog::load_at(dir.path(), later).unwrap().get("slack").unwrap().client_id, "one");
        assert_eq!(Catalog::load_at(dir.path(), later).unwrap().get("slack").unwrap().client_id, "one");
        assert_eq!(parsed(), 3);
        // Changed (another size, a new inode): parsed again.
        let tmp = dir.path().join("new.json");
        std::fs::write(&tmp, r#"{"connectors":{"slack":{"clientId":"three"}}}"#).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        assert_eq!(Catalog::load_at(dir.path(), later).unwrap().get("slack").unwrap().client_id, "three");
        assert_eq!(parsed(), 4);
    }

    #[test]
    fn every_builtin_endpoint_is_https() {
        let c = build("builtin.json", None).unwrap();
        assert!(c.connectors.len() >= 5);
        for d in c.connectors.values() {
            for url in [&d.authorize_url, &d.token_url, &d.api_base_url] {
                assert!(url.starts_with("https://"), "{}: {url}", d.id);
            }
        }
    }

    #[test]
    fn builtin_catalog_loads_and_a_user_file_overrides_or_adds() {
        let dir = tempfile::tempdir().unwrap();
        let c = Catalog::load(dir.path()).unwrap();
        assert!(c.get("github").unwrap().tools.contains_key("create-pull-request"));
        assert!(c.get("slack").unwrap().unavailable_reason().is_some());
        std::fs::write(
            dir.path().join("connectors.json"),
            r#"{"connectors":{"slack":{"clientId":"abc"},"acme":{"name":"Acme","authorizeUrl":"http://127.0.0.1:9/a",
               "tokenUrl":"http://127.0.0.1:9/t","apiBaseUrl":"http://localhost:9","tools":{"x":{"method":"GET","path":"/x"}}}}}"#,
        )
        .unwrap();
        let c = Catalog::load(dir.path()).unwrap();
        assert_eq!(c.get("slack").unwrap().client_id, "abc");
        assert_eq!(c.get("slack").unwrap().token_url, "https://slack.com/api/oauth.v2.access");
        assert_eq!(c.get("acme").unwrap().allowed_tool_names(), vec!["x"]);
        std::fs::write(dir.path().join("connectors.json"), r#"{"connectors":{"acme":{"name":"A","authorizeUrl":"http://evil.test/a","tokenUrl":"https://t","apiBaseUrl":"https://a","tools":{}}}}"#).unwrap();
        let e = Catalog::load(dir.path()).unwrap_err().to_string();
        assert!(e.contains("connectors.acme.authorizeUrl"), "{e}");
        std::fs::write(dir.path().join("connectors.json"), r#"{"connectors":{"acme":{"name":"A"}}}"#).unwrap();
        let e = Catalog::load(dir.path()).unwrap_err().to_string();
        assert!(e.contains("connectors.acme") && e.contains("authorizeUrl"), "{e}");
    }
}
