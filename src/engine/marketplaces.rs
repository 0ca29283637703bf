//! Marketplace commands: add an `open-design-marketplace.json` index (a file or an `http(s)` URL),
//! list, show, refresh, set its trust tier, remove, search entries across all of them, and resolve
//! an entry name to an install source.

use od_events::marketplaces::{MarketplaceAdded, MarketplaceRefreshed, MarketplaceRemoved, MarketplaceTrusted};
use od_events::{Event, StreamId};
use od_projections::Marketplace;
use serde_json::Value;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;

use super::plugins::PluginError;
use super::Engine;
use crate::limits::MAX_MARKETPLACE_INDEX_BYTES;
use crate::net::outbound::default_deadline;
use crate::net::Outbound;
use crate::store::Append;

const TIERS: [&str; 3] = ["official", "trusted", "restricted"];

fn stream(id: &str) -> Result<StreamId, PluginError> {
    StreamId::typed("marketplace", id).map_err(|e| PluginError::BadMarketplace(format!("id {id:?}: {e}")))
}

fn check_tier(trust: &str) -> Result<(), PluginError> {
    match TIERS.contains(&trust) {
        true => Ok(()),
        false => Err(PluginError::BadMarketplace(format!("trust {trust:?} is not official, trusted or restricted"))),
    }
}

/// The index at `url`: an `http(s)` download through the outbound client (the URL rule, a
/// deadline, redirects only to the same host), or a local file opened without blocking (a FIFO or
/// a device is refused at once), both bounded by [`MAX_MARKETPLACE_INDEX_BYTES`].
fn read_index(url: &str) -> Result<String, PluginError> {
    if url.starts_with("http://") || url.starts_with("https://") {
        let client = Outbound::new(default_deadline(), MAX_MARKETPLACE_INDEX_BYTES);
        let got = client.get(url, "application/json").map_err(PluginError::from_outbound)?;
        return String::from_utf8(got.body).map_err(|_| PluginError::BadMarketplace(format!("{url}: not UTF-8")));
    }
    // A local index the caller named: unreadable is a bad input (422), not a failed download.
    let bad = |m: String| PluginError::BadMarketplace(format!("{url:?}: cannot read the index: {m}"));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(url)
        .map_err(|e| bad(e.to_string()))?;
    let m = f.metadata().map_err(|e| bad(e.to_string()))?;
    if !m.file_type().is_file() {
        return Err(bad("not a regular file".into()));
    }
    if m.len() > MAX_MARKETPLACE_INDEX_BYTES {
        return Err(bad(format!("{} bytes, larger than {MAX_MARKETPLACE_INDEX_BYTES} bytes", m.len())));
    }
    let mut text = String::new();
    f.take(MAX_MARKETPLACE_INDEX_BYTES + 1).read_to_string(&mut text).map_err(|e| bad(e.to_string()))?;
    if text.len() as u64 > MAX_MARKETPLACE_INDEX_BYTES {
        return Err(bad(format!("larger than {MAX_MARKETPLACE_INDEX_BYTES} bytes")));
    }
    Ok(text)
}

/// An entry's `source` as an install source: `github:`, `http(s)://` and absolute paths as they
/// are; a relative one against the index — its URL for an index fetched over http(s) (so
/// `./x.tgz` in `https://h/m/index.json` is `https://h/m/x.tgz`), else its file's folder.
fn resolve_source(index: &str, src: &str) -> String {
    if src.starts_with("github:") || src.starts_with("http") || std::path::Path::new(src).is_absolute() {
        return src.to_string();
    }
    if index.starts_with("http://") || index.starts_with("https://") {
        return url::Url::parse(index).and_then(|u| u.join(src)).map_or_else(|_| src.to_string(), |u| u.to_string());
    }
    let base = std::path::Path::new(index).parent().map(|p| p.to_path_buf()).unwrap_or_default();
    base.join(src).display().to_string()
}

/// Reads and checks an index: `name`, and `plugins[]` entries with `name`, `source`, `version`.
fn fetch_index(url: &str) -> Result<Value, PluginError> {
    let text = read_index(url)?;
    let v: Value =
        serde_json::from_str(&text).map_err(|e| PluginError::BadMarketplace(format!("{url}: not JSON: {e}")))?;
    let name = v["name"].as_str().filter(|s| !s.is_empty());
    name.ok_or_else(|| PluginError::BadMarketplace(format!("{url}: `name` is required")))?;
    let plugins = v["plugins"]
        .as_array()
        .ok_or_else(|| PluginError::BadMarketplace(format!("{url}: `plugins` must be an array")))?;
    for (i, e) in plugins.iter().enumerate() {
        for field in ["name", "source", "version"] {
            if e[field].as_str().is_none_or(str::is_empty) {
                return Err(PluginError::BadMarketplace(format!("{url}: plugins[{i}].{field} is required")));
            }
        }
    }
    Ok(v)
}

/// A marketplace id from its index name (`open-design/official` → `open-design-official`).
fn id_of(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c.to_ascii_lowercase() } else { '-' })
        .collect()
}

impl Engine {
    /// Configured marketplaces.
    pub fn marketplaces(&self) -> Result<Vec<Marketplace>, PluginError> {
        Ok(self.markets.get()?.0.marketplaces.into_values().collect())
    }

    /// One marketplace.
    pub fn marketplace(&self, id: &str) -> Result<Marketplace, PluginError> {
        self.markets
            .read(|m| m.marketplaces.get(id).cloned())?
            .ok_or_else(|| PluginError::MarketplaceNotFound(id.to_string()))
    }

    /// Adds the index at `url` (a path or `http` URL) with `trust` (default `restricted`).
    pub fn add_marketplace(&self, url: &str, trust: Option<&str>) -> Result<Marketplace, PluginError> {
        let trust = trust.unwrap_or("restricted");
        check_tier(trust)?;
        let url = match std::fs::canonicalize(url) {
            Ok(p) if !url.starts_with("http") => p.display().to_string(),
            _ => url.to_string(),
        };
        let index = fetch_index(&url)?;
        let id = id_of(index["name"].as_str().unwrap_or(""));
        if self.markets.read(|m| m.marketplaces.contains_key(&id))? {
            return Err(PluginError::BadMarketplace(format!(
                "marketplace {id} is already added; refresh or remove it"
            )));
        }
        let e = MarketplaceAdded { id: id.clone(), url, trust: trust.into(), manifest_json: index.to_string() };
        self.store.append(Append::new(stream(&id)?, vec![Event::MarketplaceAdded(e)]))?;
        self.marketplace(&id)
    }

    /// Fetches the index again; records a refresh only when it changed. Returns (marketplace, changed).
    pub fn refresh_marketplace(&self, id: &str) -> Result<(Marketplace, bool), PluginError> {
        let m = self.marketplace(id)?;
        let index = fetch_index(&m.url)?.to_string();
        if index == m.manifest_json {
            return Ok((m, false));
        }
        let e = MarketplaceRefreshed { id: id.into(), manifest_json: index };
        self.store.append(Append::new(stream(id)?, vec![Event::MarketplaceRefreshed(e)]))?;
        Ok((self.marketplace(id)?, true))
    }

    /// Sets a marketplace's trust tier.
    pub fn trust_marketplace(&self, id: &str, trust: &str) -> Result<Marketplace, PluginError> {
        check_tier(trust)?;
        self.marketplace(id)?;
        let e = MarketplaceTrusted { id: id.into(), trust: trust.into() };
        self.store.append(Append::new(stream(id)?, vec![Event::MarketplaceTrusted(e)]))?;
        self.marketplace(id)
    }

    /// Removes a marketplace (installed plugins stay).
    pub fn remove_marketplace(&self, id: &str) -> Result<Marketplace, PluginError> {
        let m = self.marketplace(id)?;
        self.store
            .append(Append::new(stream(id)?, vec![Event::MarketplaceRemoved(MarketplaceRemoved { id: id.into() })]))?;
        Ok(m)
    }

    /// Entries whose name, title, description or tags contain `query` (case-insensitive), each with
    /// its marketplace id and trust, by marketplace id then position in its index; each hit comes
    /// with that position (the list's sort key, for paging).
    pub fn search_marketplaces(&self, query: &str) -> Result<Vec<(usize, Value)>, PluginError> {
        let q = query.to_lowercase();
        let mut out = Vec::new();
        for m in self.marketplaces()? {
            let index: Value = serde_json::from_str(&m.manifest_json).unwrap_or(Value::Null);
            for (pos, e) in index["plugins"].as_array().into_iter().flatten().enumerate() {
                let hay =
                    [&e["name"], &e["title"], &e["description"], &e["tags"]].map(|v| v.to_string().to_lowercase());
                if q.is_empty() || hay.iter().any(|h| h.contains(&q)) {
                    let mut hit = e.clone();
                    hit["marketplaceId"] = Value::from(m.id.clone());
                    hit["marketplaceTrust"] = Value::from(m.trust.as_str());
                    out.push((pos, hit));
                }
            }
        }
        Ok(out)
    }

    /// The entry named `name` in some marketplace: (its source, whether that marketplace is trusted).
    /// A relative source is resolved against the index file's folder.
    pub fn resolve_entry(&self, name: &str) -> Result<Option<(String, bool, Option<String>)>, PluginError> {
        for m in self.marketplaces()? {
            let index: Value = serde_json::from_str(&m.manifest_json).unwrap_or(Value::Null);
            let found = index["plugins"].as_array().into_iter().flatten().find(|e| e["name"] == name);
            if let Some(src) = found.and_then(|e| e["source"].as_str()) {
                let trusted = m.trust != od_events::vocab::Trust::Restricted;
                let resolved = resolve_source(&m.url, src);
                let integrity =
                    found.and_then(|e| e["dist"]["integrity"].as_str().or(e["integrity"].as_str())).map(str::to_string);
                return Ok(Some((resolved, trusted, integrity)));
            }
        }
        Ok(None)
    }
}
