//! The CLI side of paging: `--limit`, `--cursor` and `--all` on every list command. One page prints
//! as the route returns it (the list field plus `nextCursor`); `--all` walks every page, printing
//! each item as it arrives (one JSON object per line with `--json` or on a pipe, else through the
//! command's row formatter), so memory stays one page whatever the history holds. For people, a
//! list is a table ([`print_table`]): headers, aligned columns, ids shortened to unique prefixes,
//! and a `next page: --cursor …` line when more follow.

use serde_json::Value;

use super::conn::{path_segment, Conn};
use super::error::CliResult;
use super::human::{short_ids, table, Col, Look};
use super::Ctx;

/// Paging flags shared by list commands.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct PageArgs {
    /// Items per page (1..=1000; default 50).
    #[arg(long)]
    pub limit: Option<u32>,
    /// Resume after this cursor (a previous page's `nextCursor`).
    #[arg(long)]
    pub cursor: Option<String>,
    /// Walk every page, printing items as they arrive.
    #[arg(long, conflicts_with = "cursor")]
    pub all: bool,
}

impl PageArgs {
    /// `path` with this request's `limit` / `cursor` appended to its query.
    pub fn path(&self, path: &str, cursor: Option<&str>) -> String {
        let mut q = Vec::new();
        if let Some(l) = self.limit {
            q.push(format!("limit={l}"));
        }
        if let Some(c) = cursor.or(self.cursor.as_deref()) {
            q.push(format!("cursor={}", path_segment(c)));
        }
        if q.is_empty() {
            return path.to_string();
        }
        let sep = if path.contains('?') { '&' } else { '?' };
        format!("{path}{sep}{}", q.join("&"))
    }
}

/// Prints a list: one page (as returned, through `human` on a terminal), or with `--all` every
/// item of every page (`row` formats one item for people; JSON lines otherwise).
pub fn print_list(
    ctx: &Ctx,
    conn: &Conn,
    path: &str,
    field: &str,
    args: &PageArgs,
    human: impl Fn(&Value) -> String,
    row: impl Fn(&Value) -> String,
) -> CliResult {
    if !args.all {
        let v = conn.get(&args.path(path, None))?;
        ctx.print(&v, human);
        return Ok(());
    }
    let mut cursor: Option<String> = None;
    loop {
        let v = conn.get(&args.path(path, cursor.as_deref()))?;
        for item in v[field].as_array().into_iter().flatten() {
            let line = if ctx.json { item.to_string() } else { row(item) };
            if !emit(&line) {
                return Ok(());
            }
        }
        match v["nextCursor"].as_str() {
            Some(c) if !c.is_empty() => cursor = Some(c.to_string()),
            _ => return Ok(()),
        }
    }
}

/// Writes one line to stdout; false once the reader has gone (a closed pipe, as under `| head`):
/// the walk then ends quietly instead of reading pages nobody reads.
pub fn emit(line: &str) -> bool {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{line}") {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => false,
        Err(e) => panic!("writing to stdout: {e}"),
    }
}

/// How a list prints as a table for people.
pub struct TableView<'a> {
    pub cols: &'a [Col],
    /// The columns holding ids: shown as their shortest unique prefixes among the page's.
    pub ids: &'a [usize],
    /// What a page without items prints.
    pub empty: &'a str,
    /// One item's cells, in `cols` order.
    pub row: &'a dyn Fn(&Look, &Value) -> Vec<String>,
}

impl TableView<'_> {
    /// The items as a table (their ids shortened among themselves).
    pub fn render(&self, look: &Look, items: &[Value]) -> String {
        let mut rows: Vec<Vec<String>> = items.iter().map(|i| (self.row)(look, i)).collect();
        for &c in self.ids {
            let full: Vec<String> = rows.iter().map(|r| r.get(c).cloned().unwrap_or_default()).collect();
            let short = short_ids(&full.iter().map(String::as_str).collect::<Vec<_>>());
            for (r, id) in rows.iter_mut().zip(short) {
                if let Some(cell) = r.get_mut(c) {
                    *cell = id;
                }
            }
        }
        table(look, self.cols, rows)
    }
}

/// Prints a list: JSON as [`print_list`] does; for people one page as a table (or `empty`) with a
/// `next page: --cursor …` line when more follow, or with `--all` each page's rows as they arrive
/// (the header once).
pub fn print_table(ctx: &Ctx, conn: &Conn, path: &str, field: &str, args: &PageArgs, view: &TableView) -> CliResult {
    if ctx.json {
        return print_list(ctx, conn, path, field, args, |v| v.to_string(), |i| i.to_string());
    }
    let mut cursor: Option<String> = None;
    let mut first = true;
    loop {
        let v = conn.get(&args.path(path, cursor.as_deref()))?;
        let items: &[Value] = v[field].as_array().map_or(&[], Vec::as_slice);
        let next = v["nextCursor"].as_str().filter(|c| !c.is_empty());
        let mut out = match (items.is_empty(), first) {
            (true, true) => view.empty.to_string(),
            (true, false) => String::new(),
            (false, true) => view.render(&ctx.look, items),
            (false, false) => view.render(&ctx.look, items).lines().skip(1).collect::<Vec<_>>().join("\n"),
        };
        if let (Some(c), false) = (next, args.all) {
            out.push_str(&format!("\nnext page: --cursor {c}"));
        }
        if !out.is_empty() && !emit(&out) {
            return Ok(());
        }
        first = false;
        match next {
            Some(c) if args.all => cursor = Some(c.to_string()),
            _ => return Ok(()),
        }
    }
}

/// [`print_list`] for a list printed one `row` per item: on a terminal `empty` when the page holds
/// none, and a `more: --cursor …` line when more follow.
pub fn print_rows(
    ctx: &Ctx,
    conn: &Conn,
    path: &str,
    field: &str,
    args: &PageArgs,
    empty: &str,
    row: impl Fn(&Value) -> String,
) -> CliResult {
    let human = |v: &Value| {
        let mut rows: Vec<String> = v[field].as_array().into_iter().flatten().map(&row).collect();
        if rows.is_empty() {
            rows.push(empty.to_string());
        }
        if let Some(c) = v["nextCursor"].as_str() {
            rows.push(format!("more: --cursor {c}"));
        }
        rows.join("\n")
    };
    print_list(ctx, conn, path, field, args, human, &row)
}
