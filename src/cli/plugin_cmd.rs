//! `od plugin list|info|install|uninstall|doctor`.

use clap::Subcommand;
use serde_json::{json, Value};

use super::conn::path_segment;
use super::{s, CliError, CliResult, Ctx};

#[derive(Subcommand, Debug)]
pub enum PluginCmd {
    /// Installed plugins (bundled first, then by id; paged).
    List {
        #[command(flatten)]
        page: super::paging::PageArgs,
        /// Titles in this locale (`zh-CN`, `ko`; then the base language, `en`, the first available).
        #[arg(long)]
        locale: Option<String>,
    },
    /// One installed plugin, with its manifest.
    Info {
        id: String,
        #[arg(long)]
        locale: Option<String>,
    },
    /// Install a plugin folder; prints ND-JSON progress (`progress`, then `success` or `error`).
    Install {
        source: String,
        /// Install as `restricted` (only `prompt:inject` until you grant more with `od plugin trust`).
        #[arg(long)]
        restricted: bool,
        /// Link a local folder instead of copying it once: the daemon watches it and loads it again
        /// (500 ms after the last change) while it runs; runs keep the snapshot they started with.
        #[arg(long)]
        link: bool,
    },
    /// Grant capabilities to an installed plugin (persisted), or revoke them with --revoke.
    Trust {
        id: String,
        /// Comma-separated capabilities, e.g. `network,mcp:figma` (no wildcards but `pipeline:*`).
        #[arg(long, value_delimiter = ',', required = true)]
        capabilities: Vec<String>,
        #[arg(long)]
        revoke: bool,
    },
    /// Resolve a plugin with inputs (pure: writes nothing); exit 67 on missing inputs, 66 on
    /// capabilities not granted.
    Apply {
        id: String,
        /// All inputs as a JSON object.
        #[arg(long)]
        inputs: Option<String>,
        /// One input, `name=value` (repeatable; wins over --inputs).
        #[arg(long = "input")]
        input: Vec<String>,
        /// Capabilities granted for this call only, comma-separated.
        #[arg(long, value_delimiter = ',')]
        grant_caps: Vec<String>,
        #[arg(long)]
        locale: Option<String>,
        /// Apply in this project (surfaces it already answered are marked `remembered`).
        #[arg(long)]
        project: Option<String>,
        /// A context chip to go without, `<kind>:<ref>` as the apply lists them (repeatable).
        #[arg(long = "without")]
        without: Vec<String>,
    },
    /// Re-install a plugin from the source it came from (bundled plugins refuse).
    Upgrade { id: String },
    /// Uninstall a plugin (bundled plugins refuse).
    Uninstall { id: String },
    /// Check a plugin folder (a path) or an installed plugin (an id); stable diagnostic codes. For an
    /// installed plugin, snapshots of an older version are marked stale (never rewritten).
    Doctor { target: String },
    /// Applied-plugin snapshots: list, show, record, prune.
    #[command(subcommand)]
    Snapshots(super::snapshot_cmd::SnapshotCmd),
    /// The immutable snapshot and rerun bundle of a run (read-only; starts nothing).
    Replay {
        run_id: String,
        #[arg(long)]
        snapshot_id: String,
    },
    /// Exactly what a snapshot used, from the snapshot (not the plugin as installed now): `od` (a
    /// plugin folder that installs and applies to the same digest) or `skill` (SKILL.md alone).
    Export {
        #[arg(long)]
        snapshot_id: String,
        #[arg(long = "as", default_value = "od")]
        target: String,
        /// A folder (new or empty), or a `.tar` file.
        #[arg(long)]
        out: std::path::PathBuf,
    },
    /// Write a starter plugin (SKILL.md + open-design.json) that passes doctor.
    Scaffold {
        dir: std::path::PathBuf,
        /// The plugin id (default: the folder's name).
        #[arg(long)]
        name: Option<String>,
        #[arg(long)]
        title: Option<String>,
        #[arg(long, default_value = "new-generation")]
        task_kind: String,
    },
    /// Pack a plugin folder into a reproducible archive and write its marketplace entry (with
    /// `integrity`) into a marketplace folder or index file.
    Publish {
        folder: std::path::PathBuf,
        /// A marketplace folder (its `open-design-marketplace.json` is created or updated) or an
        /// index `.json` file.
        #[arg(long)]
        to: std::path::PathBuf,
    },
}

pub fn run(ctx: &Ctx, cmd: PluginCmd) -> CliResult {
    match cmd {
        PluginCmd::List { page, locale } => list(ctx, &page, locale.as_deref()),
        PluginCmd::Info { id, locale } => {
            let q = locale.map(|l| format!("?locale={}", path_segment(&l))).unwrap_or_default();
            let v = ctx.conn()?.get(&format!("/api/plugins/{}{q}", path_segment(&id)))?;
            ctx.print(&v, |v| plugin_info(&ctx.look, &v["plugin"]));
            Ok(())
        }
        PluginCmd::Install { source, restricted, link } => install(ctx, &source, restricted, link),
        PluginCmd::Uninstall { id } => {
            let v = ctx.conn()?.post(&format!("/api/plugins/{}/uninstall", path_segment(&id)), &json!({}))?;
            ctx.print(&v, |v| format!("uninstalled {} {}", s(&v["id"]), s(&v["version"])));
            Ok(())
        }
        PluginCmd::Doctor { target } => doctor(ctx, &target),
        PluginCmd::Export { snapshot_id, target, out } => {
            super::plugin_lifecycle::export(ctx, &snapshot_id, &target, &out)
        }
        PluginCmd::Scaffold { dir, name, title, task_kind } => {
            super::plugin_lifecycle::scaffold(ctx, &dir, name, title, &task_kind)
        }
        PluginCmd::Publish { folder, to } => super::plugin_lifecycle::publish(ctx, &folder, &to),
        PluginCmd::Snapshots(c) => super::snapshot_cmd::run(ctx, c),
        PluginCmd::Replay { run_id, snapshot_id } => {
            let body = json!({ "snapshotId": snapshot_id });
            let conn = ctx.conn()?;
            let run_id = ctx.resolve(&conn, "run", &run_id)?;
            let v = conn.post(&format!("/api/runs/{}/replay", path_segment(&run_id)), &body)?;
            ctx.print(&v, |v| serde_json::to_string_pretty(v).unwrap_or_default());
            Ok(())
        }
        PluginCmd::Upgrade { id } => {
            let v = ctx.conn()?.post(&format!("/api/plugins/{}/upgrade", path_segment(&id)), &json!({}))?;
            ctx.print(&v, |v| match v["unchanged"] == true {
                true => format!("{} is up to date ({})", s(&v["plugin"]["id"]), s(&v["plugin"]["version"])),
                false => {
                    format!("{} {} → {}", s(&v["plugin"]["id"]), s(&v["previousVersion"]), s(&v["plugin"]["version"]))
                }
            });
            Ok(())
        }
        PluginCmd::Apply { id, inputs, input, grant_caps, locale, project, without } => {
            let map = super::args::inputs_map(inputs, input)?;
            apply(ctx, &id, map, Grants { caps: grant_caps, without }, locale, project)
        }
        PluginCmd::Trust { id, capabilities, revoke } => {
            let action = if revoke { "revoke" } else { "grant" };
            let body = json!({ "capabilities": capabilities, "action": action });
            let v = ctx.conn()?.post(&format!("/api/plugins/{}/trust", path_segment(&id)), &body)?;
            ctx.print(&v, |v| format!("{} now holds: {}", s(&v["id"]), v["capabilitiesGranted"]));
            Ok(())
        }
    }
}

/// `od plugin list`: the installed plugins, paged (titles in `locale` when given).
fn list(ctx: &Ctx, page: &super::paging::PageArgs, locale: Option<&str>) -> CliResult {
    use super::human::{col, keep};
    let row = |_: &super::human::Look, p: &Value| {
        vec![
            s(&p["id"]).to_string(),
            s(&p["version"]).to_string(),
            s(&p["trust"]).to_string(),
            s(&p["title"]).to_string(),
        ]
    };
    let cols = [keep("PLUGIN"), keep("VERSION"), keep("TRUST"), col("TITLE")];
    let view = super::paging::TableView { cols: &cols, ids: &[], empty: "no plugins installed", row: &row };
    let path = match locale {
        Some(l) => format!("/api/plugins?locale={}", path_segment(l)),
        None => "/api/plugins".to_string(),
    };
    super::paging::print_table(ctx, &ctx.conn()?, &path, "plugins", page, &view)
}

/// What an apply is granted and goes without: `--grant-caps`, `--without`.
struct Grants {
    caps: Vec<String>,
    without: Vec<String>,
}

/// `od plugin apply`: the plugin applied with these inputs and grants (its snapshot recorded).
fn apply(
    ctx: &Ctx,
    id: &str,
    map: serde_json::Map<String, Value>,
    grants: Grants,
    locale: Option<String>,
    project: Option<String>,
) -> CliResult {
    let conn = ctx.conn()?;
    let project = ctx.resolve_opt(&conn, "project", project)?;
    let body = json!({ "inputs": map, "grantCaps": grants.caps, "locale": locale, "projectId": project,
        "excludeContext": grants.without });
    let v = conn.post(&format!("/api/plugins/{}/apply", path_segment(id)), &body)?;
    ctx.print(&v, applied_text);
    Ok(())
}

fn install(ctx: &Ctx, source: &str, restricted: bool, link: bool) -> CliResult {
    // A relative folder is resolved here, where the user typed it, not in the daemon's directory.
    let p = std::path::Path::new(source);
    let source = if p.exists() {
        std::fs::canonicalize(p).map_or(source.to_string(), |c| c.display().to_string())
    } else {
        source.to_string()
    };
    let mut failed = None;
    let trust = if restricted { "restricted" } else { "trusted" };
    // A linked folder is watched by the daemon, so it needs one that outlives this command.
    let conn = if link { ctx.conn_daemon()? } else { ctx.conn()? };
    let body = json!({ "source": source, "trust": trust, "link": link });
    conn.lines_post("/api/plugins/install", &body, |line| {
        let v = serde_json::from_str::<Value>(line).unwrap_or(Value::Null);
        if v["event"] == "error" {
            failed = Some(v["data"].clone());
        }
        // Programs get the daemon's lines as they are; people a line each that reads as text
        // (an error is reported once, at the end). A reader that has gone (`| head`) stops the
        // printing, not the install.
        match ctx.json {
            true => drop(super::paging::emit(line)),
            false => {
                if let Some(text) = install_line(&v) {
                    super::paging::emit(&text);
                }
            }
        }
        Ok(true)
    })?;
    match failed {
        Some(d) => Err(CliError::from_body(0, &d.to_string())),
        None => Ok(()),
    }
}

/// A plugin for people: its fields, with the manifest as what it declares (kind, stages with their
/// `until`, inputs, GenUI surfaces, capabilities, MCP servers) instead of a JSON blob (the whole
/// manifest is `--json`'s).
fn plugin_info(look: &super::human::Look, p: &Value) -> String {
    let mut shown = p.clone();
    let m = shown.as_object_mut().and_then(|o| o.remove("manifest")).unwrap_or(Value::Null);
    let mut out = super::info_lines(look, &shown);
    let od = &m["od"];
    let names = |v: &Value, key: &str| -> Vec<String> {
        let name = |x: &Value| x.as_str().or_else(|| x[key].as_str()).map_or_else(|| x.to_string(), str::to_string);
        v.as_array().into_iter().flatten().map(name).collect()
    };
    let stages: Vec<String> = od["pipeline"]["stages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|st| match st["until"].as_str() {
            Some(u) => format!("{} (until {u})", s(&st["id"])),
            None => s(&st["id"]).to_string(),
        })
        .collect();
    let mut lines = vec![("kind", format!("{} {}", s(&od["kind"]), s(&od["taskKind"])).trim().to_string())];
    lines.push(("stages", stages.join(", ")));
    lines.push(("inputs", names(&od["inputs"], "name").join(", ")));
    lines.push(("surfaces", names(&od["genui"]["surfaces"], "id").join(", ")));
    lines.push(("capabilities", names(&od["capabilities"], "").join(", ")));
    lines.push(("mcp", names(&od["context"]["mcp"], "name").join(", ")));
    if let Some(d) = m["description"].as_str() {
        lines.insert(0, ("description", d.to_string()));
    }
    for (k, v) in lines.into_iter().filter(|(_, v)| !v.is_empty()) {
        out.push_str(&format!("\nmanifest.{k:<13} {v}"));
    }
    out
}

/// An apply for people: the brief it composed, the context chips, the stages, what it needs and
/// was granted, and its warnings (the whole result is `--json`'s).
fn applied_text(v: &Value) -> String {
    let list = |a: &Value, f: &dyn Fn(&Value) -> String| a.as_array().into_iter().flatten().map(f).collect::<Vec<_>>();
    let text = |x: &Value| x.as_str().map_or_else(|| x.to_string(), str::to_string);
    // A removable chip by the key `--without` takes (`design-system:DESIGN.md`).
    let chips = list(&v["contextItems"], &|c| match s(&c["kind"]) {
        "plugin" | "atom" => format!("{} {}", s(&c["kind"]), s(&c["label"])),
        _ => {
            let key = crate::engine::apply::chip_key(c);
            let named = key.split_once(':').map(|(_, r)| r) == Some(s(&c["label"]));
            if named {
                key
            } else {
                format!("{key} ({})", s(&c["label"]))
            }
        }
    });
    let stages = list(&v["pipeline"]["stages"], &|st| match st["until"].as_str() {
        Some(u) => format!("{} (until {u})", s(&st["id"])),
        None => s(&st["id"]).to_string(),
    });
    let p = &v["appliedPlugin"];
    let mut out =
        format!("{} {} ({})\n\n{}\n", s(&p["pluginTitle"]), s(&p["pluginVersion"]), s(&v["trust"]), s(&v["query"]));
    for (k, items) in [
        ("context", chips),
        ("stages", stages),
        ("needs", list(&v["capabilitiesRequired"], &text)),
        ("granted", list(&v["capabilitiesGranted"], &text)),
        ("surfaces", list(&v["genuiSurfaces"], &|x| s(&x["id"]).to_string())),
        ("warnings", list(&v["warnings"], &text)),
    ] {
        if !items.is_empty() {
            out.push_str(&format!("\n{k:<9} {}", items.join(", ")));
        }
    }
    out
}

/// One install progress line for people: `phase: message`, or the installed plugin's summary.
fn install_line(v: &Value) -> Option<String> {
    let d = &v["data"];
    match v["event"].as_str()? {
        "progress" => Some(format!("{}: {}", s(&d["phase"]), s(&d["message"]))),
        "success" => {
            let p = &d["plugin"];
            let what = if d["unchanged"] == true { "already installed, unchanged" } else { "installed" };
            let mut out = format!("{what}: {} {} ({})", s(&p["id"]), s(&p["version"]), s(&p["trust"]));
            for w in d["warnings"].as_array().into_iter().flatten() {
                out.push_str(&format!("\n  warning: {}", w.as_str().map_or_else(|| w.to_string(), str::to_string)));
            }
            Some(out)
        }
        _ => None,
    }
}

fn doctor(ctx: &Ctx, target: &str) -> CliResult {
    let path = std::path::Path::new(target);
    let conn = ctx.conn()?;
    let report = if path.exists() {
        let abs = std::fs::canonicalize(path).map_err(|e| CliError::new("usage", e.to_string()))?;
        conn.post("/api/plugins/doctor", &json!({ "path": abs }))?
    } else {
        conn.get(&format!("/api/plugins/{}/doctor", path_segment(target)))?
    };
    ctx.print(&report, |v| {
        let mut out = format!("{}: {}", target, if v["ok"] == true { "ok" } else { "problems found" });
        for d in v["diagnostics"].as_array().into_iter().flatten() {
            out.push_str(&format!(
                "\n  {} {} {}: {}",
                s(&d["severity"]),
                s(&d["code"]),
                s(&d["file"]),
                s(&d["message"])
            ));
        }
        out
    });
    if report["ok"] == true {
        Ok(())
    } else {
        let mut e = CliError::new("plugin-invalid", format!("{target} has errors"));
        e.data = json!({ "diagnostics": report["diagnostics"] });
        Err(e)
    }
}
