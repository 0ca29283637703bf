//! `od doctor`: checks every derived copy od can rebuild (bundled plugin copies, installed plugin
//! trees, projects' copies of artifacts) against its digest, rebuilds what does not match, and
//! reports that with what the daemon rebuilt since it started (issue 38). Exit 1 when something
//! found could not be rebuilt.

use serde_json::{json, Value};

use super::error::CliError;
use super::{CliResult, Ctx};

fn line(r: &Value) -> String {
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    let done = if r["rebuilt"] == true { "rebuilt" } else { "NOT rebuilt" };
    format!("  {done} {} {} ({}): {}", s(&r["kind"]), s(&r["id"]), s(&r["path"]), s(&r["reason"]))
}

pub fn run(ctx: &Ctx) -> CliResult {
    let v = ctx.conn()?.post("/api/doctor", &json!({}))?;
    ctx.print(&v, |v| {
        let list = |k: &str| v[k].as_array().cloned().unwrap_or_default();
        let (found, since) = (list("found"), list("rebuiltSinceStart"));
        let mut out = vec![if found.is_empty() {
            "derived copies: all match their digests".to_string()
        } else {
            format!("derived copies: {} did not match", found.len())
        }];
        out.extend(found.iter().map(line));
        if !since.is_empty() {
            out.push(format!("rebuilt since the daemon started: {}", since.len()));
            out.extend(since.iter().map(line));
        }
        out.join("\n")
    });
    if v["ok"] == false {
        return Err(CliError::new("doctor-problems", "some derived copies could not be rebuilt"));
    }
    Ok(())
}
