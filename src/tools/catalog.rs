//! The catalog's commands and reads: registering od's own tools when their definitions changed,
//! registering and importing external `api` tools, removing, keyword search (paged with a cursor, a
//! total and a truncation flag; a run's live browser tools first when a run is given), one tool's
//! descriptor, browser sessions' PUSHed advertisements, and a run's manifest.

use od_events::tools::{ToolRegistered, ToolRemoved, ToolsAdvertised};
use od_events::vocab::ToolSurface;
use od_events::{Event, StreamId};
use od_projections::tool_index::terms;
use od_projections::{SurfaceFilter, ToolCatalog, ToolEntry};
use serde_json::{json, Value};
use std::collections::BTreeSet;

use super::descriptor::{self, digest, keywords, summary};
use super::search_page::{after_anchor_in, after_removed, Anchor, WINDOW};
use super::Tools;
use super::{ToolError, PROTOCOL_VERSION};
use crate::limits::*;
use crate::projector::Projector;
use crate::store::{Append, Store};

/// The stream of catalog events.
pub const TOOLS_STREAM: &str = "tools";

fn tools_stream() -> StreamId {
    StreamId::new(TOOLS_STREAM).expect("valid stream id")
}

/// What a registration did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Registered {
    pub added: Vec<String>,
    pub changed: Vec<String>,
    pub unchanged: usize,
}

impl Registered {
    pub fn json(&self) -> Value {
        json!({ "added": self.added, "changed": self.changed, "unchanged": self.unchanged,
                "registered": self.added.len() + self.changed.len() })
    }
}

/// A search request (`AgentToolSearchQuery` plus od's `runId` and `fields`).
#[derive(Debug, Clone, Default)]
pub struct SearchQuery {
    pub query: String,
    /// `api` (default), `browser` or `all`.
    pub surface: Option<String>,
    pub limit: Option<usize>,
    pub cursor: Option<String>,
    /// Also the browser tools live in this run (listed first).
    pub run_id: Option<String>,
    /// `summary`: `{name, summary, surface, readOnly}` per tool instead of whole descriptors.
    pub fields: Option<String>,
}

fn registration(d: &Value, source: &str, now: i64, replaces: &str) -> Event {
    Event::ToolRegistered(ToolRegistered {
        name: d["name"].as_str().unwrap_or("").to_string(),
        surface: d["surface"].as_str().unwrap_or("").into(),
        description: d["description"].as_str().unwrap_or("").to_string(),
        descriptor_json: d.to_string(),
        keywords: keywords(d),
        digest: digest(d),
        replaces_digest: replaces.to_string(),
        source: source.to_string(),
        registered_at: now,
    })
}

/// Appends `events` to `tools` in appends that each fit the store's limits.
fn append_chunked(store: &Store, events: Vec<Event>, op: Option<String>) -> Result<(), ToolError> {
    let mut chunk = Vec::new();
    let mut bytes = 0usize;
    let mut n = 0;
    let flush = |chunk: &mut Vec<Event>, n: &mut usize| -> Result<(), ToolError> {
        if chunk.is_empty() {
            return Ok(());
        }
        let mut a = Append::new(tools_stream(), std::mem::take(chunk));
        if let Some(op) = &op {
            a = a.op_id(format!("{op}:{n}"));
        }
        store.append(a)?;
        *n += 1;
        Ok(())
    };
    for e in events {
        let size = e.encode_payload().len() + 128;
        if chunk.len() == MAX_EVENTS_PER_APPEND || bytes + size > MAX_APPEND_BYTES / 2 {
            flush(&mut chunk, &mut n)?;
            bytes = 0;
        }
        bytes += size;
        chunk.push(e);
    }
    flush(&mut chunk, &mut n)
}

/// Registers od's own tools whose definitions are new or changed, and retires the ones od no
/// longer has. Appends nothing when the catalog already holds exactly these.
pub(crate) fn register_builtin(store: &Store, catalog: &Projector<ToolCatalog>, now: i64) -> Result<(), ToolError> {
    let mine: Vec<Value> = super::builtin::descriptors().iter().map(descriptor::parse).collect::<Result<_, _>>()?;
    let names: BTreeSet<&str> = mine.iter().filter_map(|d| d["name"].as_str()).collect();
    let events = catalog.read(|c| {
        let mut ev: Vec<Event> = Vec::new();
        for d in &mine {
            let have = c.data.tools.get(d["name"].as_str().unwrap_or(""));
            if have.is_none_or(|t| t.digest != digest(d) || t.source != "builtin") {
                ev.push(registration(d, "builtin", now, have.map_or("", |t| t.digest.as_str())));
            }
        }
        for t in c.data.tools.values().filter(|t| t.source == "builtin" && !names.contains(t.name.as_str())) {
            ev.push(Event::ToolRemoved(ToolRemoved {
                name: t.name.clone(),
                source: t.source.clone(),
                reason: "builtin-retired".into(),
                removed_at: now,
            }));
        }
        ev
    })?;
    if events.is_empty() {
        return Ok(());
    }
    let all = blake3::hash(mine.iter().map(digest).collect::<String>().as_bytes()).to_hex();
    append_chunked(store, events, Some(format!("tools:builtin:{}", &all[..32])))
}

fn descriptor_of(t: &ToolEntry) -> Value {
    serde_json::from_str(&t.descriptor_json).unwrap_or(Value::Null)
}

fn summary_of(d: &Value) -> Value {
    let mut v = json!({ "name": d["name"], "summary": summary(d["description"].as_str().unwrap_or(""), DISCLOSURE_SUMMARY_CHARS) });
    if d["surface"] == "browser" {
        v["surface"] = json!("browser");
    }
    if d["readOnly"] == true {
        v["readOnly"] = json!(true);
    }
    v
}

fn parse_surface(s: Option<&str>) -> Result<SurfaceFilter, ToolError> {
    match s.unwrap_or("api") {
        "api" => Ok(SurfaceFilter::Api),
        "browser" => Ok(SurfaceFilter::Browser),
        "all" => Ok(SurfaceFilter::All),
        other => Err(ToolError::invalid("surface", format!("{other:?}: api, browser or all"))),
    }
}

/// Whether a browser tool matches a query (any query term in its name or description).
fn matches(query_terms: &[String], d: &Value) -> bool {
    if query_terms.is_empty() {
        return true;
    }
    let mut t = Vec::new();
    terms(d["name"].as_str().unwrap_or(""), &mut t);
    terms(d["description"].as_str().unwrap_or(""), &mut t);
    query_terms.iter().any(|q| t.contains(q))
}

impl Tools {
    /// One registered tool.
    pub fn tool_entry(&self, name: &str) -> Result<ToolEntry, ToolError> {
        self.ensure_builtin()?;
        self.catalog.read(|c| c.data.tools.get(name).cloned())?.ok_or_else(|| ToolError::NotFound(name.into()))
    }

    /// `{tool, source, digest, registeredAt}` of a registered tool.
    pub fn tool_json(&self, name: &str) -> Result<Value, ToolError> {
        let t = self.tool_entry(name)?;
        Ok(
            json!({ "tool": descriptor_of(&t), "source": t.source, "digest": t.digest, "registeredAt": t.registered_at }),
        )
    }

    /// Registers (or updates) descriptors under `source`; unchanged ones append nothing.
    pub fn register_tools(&self, descs: &[Value], source: &str) -> Result<Registered, ToolError> {
        self.ensure_builtin()?;
        let now = self.engine.clock().now_ms();
        let mut seen = BTreeSet::new();
        for d in descs {
            if !seen.insert(d["name"].as_str().unwrap_or("")) {
                return Err(ToolError::invalid("tools", format!("{} is listed twice", d["name"])));
            }
        }
        let (events, out) = self.catalog.read(|c| -> Result<_, ToolError> {
            let mut out = Registered::default();
            let mut ev = Vec::new();
            for d in descs {
                let name = d["name"].as_str().unwrap_or("");
                match c.data.tools.get(name) {
                    Some(t) if t.source == "builtin" && source != "builtin" => {
                        return Err(ToolError::invalid("name", format!("{name} is one of od's own tools")));
                    }
                    Some(t) if t.digest == digest(d) && t.source == source => out.unchanged += 1,
                    Some(t) => {
                        out.changed.push(name.to_string());
                        ev.push(registration(d, source, now, &t.digest));
                    }
                    None => {
                        out.added.push(name.to_string());
                        ev.push(registration(d, source, now, ""));
                    }
                }
            }
            let total = c.count(SurfaceFilter::All) + out.added.len();
            if total > MAX_CATALOG_TOOLS {
                return Err(ToolError::Limit { limit: "MAX_CATALOG_TOOLS", value: total, max: MAX_CATALOG_TOOLS });
            }
            Ok((ev, out))
        })??;
        append_chunked(self.engine.store(), events, None)?;
        Ok(out)
    }

    /// Imports external tools (an array of tools, an MCP `tools/list` result, or a JSON-RPC
    /// response carrying one) as `api` tools named `<namespace>.<name>`.
    pub fn import_tools(&self, body: &Value, namespace: Option<&str>, label: &str) -> Result<Registered, ToolError> {
        if let Some(ns) = namespace {
            let ok = !ns.is_empty()
                && ns
                    .split('.')
                    .all(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'));
            if !ok || !ns.starts_with(|c: char| c.is_ascii_alphabetic()) {
                return Err(ToolError::invalid(
                    "namespace",
                    format!("{ns:?}: letters, digits, _ and - (dot-separated)"),
                ));
            }
        }
        let list = body
            .as_array()
            .or_else(|| body["tools"].as_array())
            .or_else(|| body["result"]["tools"].as_array())
            .ok_or_else(|| {
                ToolError::invalid("tools", "an array of tools, or {tools: [...]} (an MCP tools/list result)")
            })?;
        let origin = json!({ "kind": "import", "source": label });
        let mut descs = Vec::with_capacity(list.len());
        for (i, t) in list.iter().enumerate() {
            if t["surface"] == "browser" {
                return Err(ToolError::invalid(
                    &format!("tools[{i}]"),
                    "browser tools are advertised by their session, not imported",
                ));
            }
            let d = descriptor::from_external(t, namespace, origin.clone()).map_err(|e| match e {
                ToolError::Invalid { field, message } => {
                    ToolError::Invalid { field: format!("tools[{i}].{field}"), message }
                }
                other => other,
            })?;
            descs.push(d);
        }
        self.register_tools(&descs, &format!("import:{label}"))
    }

    /// Removes a tool (od's own tools cannot be removed).
    pub fn remove_tool(&self, name: &str) -> Result<ToolEntry, ToolError> {
        let t = self.tool_entry(name)?;
        if t.source == "builtin" {
            return Err(ToolError::invalid("name", format!("{name} is one of od's own tools")));
        }
        let e = ToolRemoved {
            name: t.name.clone(),
            source: t.source.clone(),
            reason: "removed".into(),
            removed_at: self.engine.clock().now_ms(),
        };
        self.engine.store().append(Append::new(tools_stream(), vec![Event::ToolRemoved(e)]))?;
        Ok(t)
    }

    /// The browser tools live in `run_id` (latest advertisement of a name wins), each with the
    /// session that has it.
    pub fn live_browser_tools(&self, run_id: &str) -> Result<Vec<(String, Value)>, ToolError> {
        let sessions = self
            .browser
            .read(|r| od_projections::browser::run_sessions(r, run_id, crate::limits::MAX_WORKING_SET_READ))?;
        let mut out: Vec<(String, Value)> = Vec::new();
        for s in sessions {
            let tools: Vec<Value> = serde_json::from_str(&s.tools_json).unwrap_or_default();
            for t in tools {
                out.retain(|(_, d)| d["name"] != t["name"]);
                out.push((s.session_id.clone(), t));
            }
        }
        Ok(out)
    }

    /// Keyword search: `{tools, nextCursor?, total, truncated}`, paged by a cursor anchored on the
    /// last item shown (see `search_page.rs` for where a page resumes and what a registration
    /// between two pages does).
    pub fn search_tools(&self, q: &SearchQuery) -> Result<Value, ToolError> {
        self.ensure_builtin()?;
        let filter = parse_surface(q.surface.as_deref())?;
        let limit = q.limit.unwrap_or(TOOL_SEARCH_DEFAULT_PAGE);
        if !(1..=TOOL_SEARCH_MAX_PAGE).contains(&limit) {
            return Err(ToolError::invalid("limit", format!("{limit} is outside 1..={TOOL_SEARCH_MAX_PAGE}")));
        }
        let anchor =
            match q.cursor.as_deref().filter(|c| !c.is_empty()) {
                None => None,
                Some(c) => Some(Anchor::parse(c).ok_or_else(|| {
                    ToolError::invalid("cursor", format!("{c:?} is not a cursor this search returned"))
                })?),
            };
        let mut qt = Vec::new();
        terms(&q.query, &mut qt);
        let live: Vec<Value> = match (&q.run_id, filter) {
            (Some(run), SurfaceFilter::Browser | SurfaceFilter::All) => {
                self.engine.run_info(run)?;
                self.live_browser_tools(run)?.into_iter().map(|(_, d)| d).filter(|d| matches(&qt, d)).collect()
            }
            _ => Vec::new(),
        };
        let live_from = match &anchor {
            None => 0,
            Some(a) if a.part == 0 => live
                .iter()
                .position(|d| d["name"] == a.name.as_str())
                .map_or(a.pos as usize + 1, |i| i + 1)
                .min(live.len()),
            Some(_) => live.len(),
        };
        let shown_live: Vec<Value> = live[live_from..].iter().take(limit).cloned().collect();
        let live_last = shown_live.last().map(|d| Anchor {
            part: 0,
            pos: (live_from + shown_live.len() - 1) as u32,
            score: 0.0,
            name: d["name"].as_str().unwrap_or("").to_string(),
        });
        let room = limit - shown_live.len();
        let from = anchor.filter(|a| a.part == 1);
        let cat = self.catalog.read(|c| catalog_page(c, &q.query, qt.is_empty(), filter, from.as_ref(), room))?;
        let more = live_from + shown_live.len() < live.len() || cat.more;
        let last = cat.last.or(live_last);
        let next = if more { last.map(|a| a.cursor()) } else { None };
        let total = cat.total + live.len();
        let shown: Vec<Value> = shown_live.into_iter().chain(cat.items).collect();
        let summaries = q.fields.as_deref() == Some("summary");
        let tools: Vec<Value> = if summaries { shown.iter().map(summary_of).collect() } else { shown };
        let mut v = json!({ "tools": tools, "total": total, "truncated": next.is_some() });
        if let Some(n) = next {
            v["nextCursor"] = json!(n);
        }
        Ok(v)
    }

    /// Records what a browser session has mounted now (PUSH), attached to `run_id` (or none).
    pub fn advertise(&self, session_id: &str, run_id: &str, tools: &Value) -> Result<Value, ToolError> {
        let stream = StreamId::typed("browser-session", session_id)?;
        let list =
            tools.as_array().ok_or_else(|| ToolError::invalid("tools", "an array of browser tool descriptors"))?;
        if list.len() > MAX_SESSION_TOOLS {
            return Err(ToolError::Limit { limit: "MAX_SESSION_TOOLS", value: list.len(), max: MAX_SESSION_TOOLS });
        }
        if !run_id.is_empty() {
            self.engine.run_info(run_id)?;
        }
        let mut descs: Vec<Value> = Vec::with_capacity(list.len());
        for (i, t) in list.iter().enumerate() {
            let d = descriptor::parse(t).map_err(|e| match e {
                ToolError::Invalid { field, message } => {
                    ToolError::Invalid { field: format!("tools[{i}].{field}"), message }
                }
                other => other,
            })?;
            if d["surface"] != "browser" {
                return Err(ToolError::invalid(
                    &format!("tools[{i}].surface"),
                    "a session advertises browser tools only",
                ));
            }
            if descs.iter().any(|x| x["name"] == d["name"]) {
                return Err(ToolError::invalid(&format!("tools[{i}].name"), "advertised twice"));
            }
            descs.push(d);
        }
        let names: Vec<String> = descs.iter().filter_map(|d| d["name"].as_str().map(str::to_string)).collect();
        let e = ToolsAdvertised {
            session_id: session_id.to_string(),
            run_id: run_id.to_string(),
            tool_names: names.clone(),
            tools_json: Value::Array(descs).to_string(),
            advertised_at: self.engine.clock().now_ms(),
        };
        self.engine.store().append(Append::new(stream, vec![Event::ToolsAdvertised(e)]))?;
        Ok(
            json!({ "sessionId": session_id, "runId": if run_id.is_empty() { Value::Null } else { json!(run_id) }, "tools": names }),
        )
    }

    /// The session closed: nothing of it is live any more.
    pub fn close_session(&self, session_id: &str) -> Result<Value, ToolError> {
        self.advertise(session_id, "", &json!([]))
    }

    /// `AgentToolManifest` of a run: od's own `api` tools and the browser tools live in the run now.
    pub fn manifest(&self, run_id: &str) -> Result<Value, ToolError> {
        self.ensure_builtin()?;
        self.engine.run_info(run_id)?;
        let mut tools: Vec<Value> = self
            .catalog
            .read(|c| c.data.tools.values().filter(|t| t.source == "builtin").map(descriptor_of).collect::<Vec<_>>())?;
        tools.extend(self.live_browser_tools(run_id)?.into_iter().map(|(_, d)| d));
        Ok(json!({ "protocolVersion": PROTOCOL_VERSION, "runId": run_id, "tools": tools }))
    }
}

/// One page of the catalog part of a search.
struct CatalogPage {
    items: Vec<Value>,
    total: usize,
    last: Option<Anchor>,
    more: bool,
}

/// Up to `room` catalog tools after `from` (no query: by name; else ranked), with the total and
/// whether more follow.
fn catalog_page(
    c: &ToolCatalog,
    query: &str,
    by_name: bool,
    filter: SurfaceFilter,
    from: Option<&Anchor>,
    room: usize,
) -> CatalogPage {
    let admits = |t: &ToolEntry| match filter {
        SurfaceFilter::Api => t.surface == ToolSurface::Api,
        SurfaceFilter::Browser => t.surface == ToolSurface::Browser,
        SurfaceFilter::All => true,
    };
    if by_name {
        use std::ops::Bound::{Excluded, Unbounded};
        let lower = from.map_or(Unbounded, |a| Excluded(a.name.clone()));
        let mut rest = c.data.tools.range((lower, Unbounded)).map(|(_, t)| t).filter(|t| admits(t));
        let items: Vec<&ToolEntry> = rest.by_ref().take(room).collect();
        let more = rest.next().is_some();
        let last = items.last().map(|t| Anchor { part: 1, pos: 0, score: 0.0, name: t.name.clone() });
        return CatalogPage {
            items: items.into_iter().map(descriptor_of).collect(),
            total: c.count(filter),
            last,
            more,
        };
    }
    // Ranked: read a window around the anchor's old position; the whole ranking only if the anchor
    // moved out of it (or was removed). `hits` starts at the page's first item, `start` in the ranking.
    let (start, hits, total): (usize, Vec<(&str, f32)>, usize) = match from {
        None => {
            let r = c.search(query, filter, 0, room + 1);
            (0, r.hits, r.total)
        }
        Some(a) => {
            let ws = (a.pos as usize).saturating_sub(WINDOW);
            let r = c.search(query, filter, ws, a.pos as usize - ws + 1 + WINDOW + room + 1);
            match after_anchor_in(&r.hits, a) {
                Some(i) if r.hits.len() > i + room || ws + r.hits.len() >= r.total => {
                    (ws + i, r.hits[i..].to_vec(), r.total)
                }
                _ => {
                    let all = c.search(query, filter, 0, usize::MAX);
                    let i = after_anchor_in(&all.hits, a).unwrap_or_else(|| after_removed(&all.hits, a));
                    (i, all.hits[i..].iter().take(room + 1).copied().collect(), all.total)
                }
            }
        }
    };
    let page = &hits[..room.min(hits.len())];
    let more = hits.len() > room;
    let last = page.last().map(|(n, s)| Anchor {
        part: 1,
        pos: (start + page.len() - 1) as u32,
        score: *s,
        name: (*n).to_string(),
    });
    let items = page.iter().filter_map(|(n, _)| c.data.tools.get(*n)).map(descriptor_of).collect();
    CatalogPage { items, total, last, more }
}
