//! Output for people, shared by every command: whether this process prints for a person or for a
//! machine (`--json`, `OD_OUTPUT`, a terminal on stdout), colours (anstyle codes, on only when
//! anstream's rules say so: a terminal or `CLICOLOR_FORCE`, never with `NO_COLOR`), local times
//! (the system zone through jiff), short ids (the shortest unique start of each id shown) and
//! tables (comfy-table, cut with an ellipsis to the terminal's width).

use comfy_table::{presets::NOTHING, Cell, ColumnConstraint, ContentArrangement, Row, Table};
use std::io::IsTerminal;

use super::error::{CliError, CliResult};
use crate::limits::SHORT_ID_CHARS;

/// Whether output is for a machine: `--json`, else `OD_OUTPUT=json|human`, else whether stdout is
/// a pipe or a file (a terminal gets human output).
pub fn machine_output(json_flag: bool) -> CliResult<bool> {
    if json_flag {
        return Ok(true);
    }
    match std::env::var("OD_OUTPUT").unwrap_or_default().as_str() {
        "json" => Ok(true),
        "human" => Ok(false),
        "" => Ok(!std::io::stdout().is_terminal()),
        other => Err(CliError::new("usage", format!("OD_OUTPUT={other:?}: expected human or json"))),
    }
}

/// How human output looks here: colours, the width tables fit, and the time "ago" counts from.
#[derive(Debug, Clone, Copy, Default)]
pub struct Look {
    pub colour: bool,
    pub width: Option<u16>,
    /// Unix ms of "now" (read once at the edge, so the formatting below stays pure).
    pub now_ms: i64,
}

impl Look {
    /// This process's look: anstream's colour choice for stdout, the terminal's width (`COLUMNS`
    /// first), the system clock.
    pub fn detect() -> Self {
        let colour = anstream::AutoStream::choice(&std::io::stdout()) != anstream::ColorChoice::Never;
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        Self { colour, width: terminal_width(), now_ms }
    }

    /// `text` in `style` when colours are on.
    pub fn paint(&self, style: anstyle::Style, text: &str) -> String {
        match self.colour {
            true => format!("{}{text}{}", style.render(), style.render_reset()),
            false => text.to_string(),
        }
    }

    /// A run status in its colour: succeeded green, failed red, running yellow, queued blue,
    /// awaiting-input magenta, canceled dim.
    pub fn status(&self, status: &str) -> String {
        match status_style(status) {
            Some(st) => self.paint(st, status),
            None => status.to_string(),
        }
    }

    /// A wire timestamp (Unix ms) as a local date-time and how long ago: `2026-12-01 18:03:12 (3 min ago)`;
    /// `-` for 0 (never, or not recorded: a bundled plugin's `installedAt`), with no age.
    pub fn when(&self, ms: i64) -> String {
        if ms == 0 {
            return local_time(ms);
        }
        format!("{} ({})", local_time(ms), ago(ms, self.now_ms))
    }
}

/// The colour of a run status (None: printed plain).
pub fn status_style(status: &str) -> Option<anstyle::Style> {
    use anstyle::{AnsiColor, Effects, Style};
    let fg = |c: AnsiColor| Style::new().fg_color(Some(c.into()));
    match status {
        "succeeded" | "ok" | "fresh" => Some(fg(AnsiColor::Green)),
        "failed" | "expired" => Some(fg(AnsiColor::Red)),
        "running" | "stale" => Some(fg(AnsiColor::Yellow)),
        "queued" => Some(fg(AnsiColor::Blue)),
        "awaiting-input" | "pending" => Some(fg(AnsiColor::Magenta)),
        "canceled" => Some(Style::new().effects(Effects::DIMMED)),
        _ => None,
    }
}

/// Columns of the terminal on stdout: `COLUMNS` when set, else the terminal's own size; None when
/// stdout is not a terminal (tables then keep every character).
fn terminal_width() -> Option<u16> {
    if let Some(c) = std::env::var("COLUMNS").ok().and_then(|c| c.trim().parse::<u16>().ok()).filter(|c| *c > 0) {
        return Some(c);
    }
    if !std::io::stdout().is_terminal() {
        return None;
    }
    let mut ws = libc::winsize { ws_row: 0, ws_col: 0, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: TIOCGWINSZ writes one `winsize` into the struct we pass, which outlives the call.
    let ok = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) } == 0;
    (ok && ws.ws_col > 0).then_some(ws.ws_col)
}

/// Unix ms as a local date-time, `2026-12-01 18:03:12` (the system time zone: `TZ`, else
/// /etc/localtime); `-` for 0 (not yet).
pub fn local_time(ms: i64) -> String {
    if ms == 0 {
        return "-".into();
    }
    match jiff::Timestamp::from_millisecond(ms) {
        Ok(t) => t.to_zoned_datetime(jiff::tz::TimeZone::system()).strftime("%Y-%m-%d %H:%M:%S").to_string(),
        Err(_) => ms.to_string(),
    }
}

/// How long before `now_ms` the time `ms` was: `just now`, `42 s ago`, `3 min ago`, `5 h ago`,
/// `2 d ago` (`in 3 min` for a time still ahead).
pub fn ago(ms: i64, now_ms: i64) -> String {
    let d = now_ms.saturating_sub(ms);
    let secs = d.unsigned_abs() / 1000;
    let amount = match secs {
        0..=4 => return "just now".into(),
        5..=59 => format!("{secs} s"),
        60..=3599 => format!("{} min", secs / 60),
        3600..=86_399 => format!("{} h", secs / 3600),
        _ => format!("{} d", secs / 86_400),
    };
    match d >= 0 {
        true => format!("{amount} ago"),
        false => format!("in {amount}"),
    }
}

/// Each id cut to its shortest start that no other id in `ids` shares, at least
/// [`SHORT_ID_CHARS`] characters (whole ids stay whole). What `od` accepts back as a prefix.
pub fn short_ids(ids: &[&str]) -> Vec<String> {
    let mut sorted: Vec<&str> = ids.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let common = |a: &str, b: &str| a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    ids.iter()
        .map(|id| {
            let at = sorted.binary_search(id).unwrap_or(0);
            let before = at.checked_sub(1).map_or(0, |i| common(id, sorted[i]));
            let after = sorted.get(at + 1).map_or(0, |n| common(id, n));
            let keep = (before.max(after) + 1).max(SHORT_ID_CHARS);
            id.chars().take(keep).collect()
        })
        .collect()
}

/// One table column: its header, and whether it keeps its full width (short fixed fields: ids,
/// statuses, times) while the others are cut with `…` to fit the terminal.
#[derive(Debug, Clone, Copy)]
pub struct Col {
    pub header: &'static str,
    pub keep: bool,
}

/// A column cut to fit.
pub const fn col(header: &'static str) -> Col {
    Col { header, keep: false }
}

/// A column kept whole.
pub const fn keep(header: &'static str) -> Col {
    Col { header, keep: true }
}

/// Renders rows under headers, columns aligned, one line per row (newlines in a cell become
/// spaces), cut to `look.width`; a column named `STATUS` is coloured by [`status_style`].
pub fn table(look: &Look, cols: &[Col], rows: Vec<Vec<String>>) -> String {
    let mut t = Table::new();
    t.load_style(NOTHING).set_truncation_indicator("…");
    match look.width {
        Some(w) => t.set_content_arrangement(ContentArrangement::Dynamic).set_width(w),
        None => t.set_content_arrangement(ContentArrangement::Disabled),
    };
    // A header is one line and never cut inside a word: each column is at least its header wide.
    let mut header = Row::from(cols.iter().map(|c| Cell::new(c.header)).collect::<Vec<_>>());
    header.max_height(1);
    t.set_header(header);
    let statuses: Vec<Option<String>> = match cols.iter().position(|c| c.header == "STATUS") {
        Some(i) => rows.iter().map(|r| r.get(i).cloned()).collect(),
        None => vec![None; rows.len()],
    };
    for r in rows {
        let mut row = Row::from(r.into_iter().map(|c| c.replace(['\n', '\r', '\t'], " ")).collect::<Vec<_>>());
        row.max_height(1);
        t.add_row(row);
    }
    let last = cols.len().saturating_sub(1);
    for (i, c) in cols.iter().enumerate() {
        if let Some(column) = t.column_mut(i) {
            column.set_padding((0, if i == last { 0 } else { 2 }));
            if c.keep {
                column.set_constraint(ColumnConstraint::ContentWidth);
            } else {
                // The boundary counts the column's padding too.
                let pad = if i == last { 0 } else { 2 };
                let least = u16::try_from(c.header.chars().count() + pad).unwrap_or(u16::MAX);
                column.set_constraint(ColumnConstraint::LowerBoundary(comfy_table::Width::Fixed(least)));
            }
        }
    }
    let mut lines: Vec<String> = t.lines().map(|l| l.trim_end().to_string()).collect();
    if look.colour {
        if let Some(at) = lines.first().and_then(|h| h.find("STATUS")) {
            for (line, st) in lines.iter_mut().skip(1).zip(statuses) {
                let Some(st) = st.filter(|s| line.get(at..).is_some_and(|rest| rest.starts_with(s.as_str()))) else {
                    continue;
                };
                *line = format!("{}{}{}", &line[..at], look.status(&st), &line[at + st.len()..]);
            }
        }
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_ids_are_unique_starts_of_at_least_eight_chars() {
        let ids = ["3f2a9c1b-0000-4000-8000-000000000001", "3f2a9c1b-0000-4000-8000-000000000002", "ab", "abcdef0123"];
        assert_eq!(
            short_ids(&ids),
            vec!["3f2a9c1b-0000-4000-8000-000000000001", "3f2a9c1b-0000-4000-8000-000000000002", "ab", "abcdef01"]
        );
        assert_eq!(short_ids(&["run-000001", "run-000002"]), vec!["run-000001", "run-000002"]);
        assert_eq!(short_ids(&["0123456789ab", "0123456799ab"]), vec!["012345678", "012345679"]);
    }

    #[test]
    fn a_time_never_set_is_a_dash_without_an_age() {
        let look = Look { colour: false, width: None, now_ms: 1_800_000_000_000 };
        assert_eq!(look.when(0), "-");
        assert!(look.when(1_800_000_000_000 - 120_000).ends_with("(2 min ago)"));
    }

    #[test]
    fn ago_counts_in_the_largest_whole_unit() {
        let now = 10_000_000_000;
        assert_eq!(ago(now - 1_000, now), "just now");
        assert_eq!(ago(now - 42_000, now), "42 s ago");
        assert_eq!(ago(now - 3 * 60_000 - 5_000, now), "3 min ago");
        assert_eq!(ago(now - 5 * 3_600_000, now), "5 h ago");
        assert_eq!(ago(now - 2 * 86_400_000, now), "2 d ago");
        assert_eq!(ago(now + 3 * 60_000, now), "in 3 min");
    }

    #[test]
    fn a_narrow_table_keeps_each_header_word_whole_on_one_line() {
        let look = Look { colour: false, width: Some(70), now_ms: 0 };
        let long = "a-value-much-longer-than-any-terminal-column-could-ever-hold-whole".to_string();
        // What fits 70 columns once the kept ones are whole: the cut ones at their headers' width.
        let cols = [keep("ID"), keep("STATUS"), col("PLUGIN"), col("PROJECT"), keep("CREATED")];
        let rows = vec![vec![
            "6b794556".into(),
            "succeeded".into(),
            long.clone(),
            long,
            "2026-12-07 12:00:00 (3 min ago)".into(),
        ]];
        let out = table(&look, &cols, rows);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 2, "one header line, one row: {out}");
        for h in ["ID", "STATUS", "PLUGIN", "PROJECT", "CREATED"] {
            assert!(lines[0].split_whitespace().any(|w| w == h), "{h} whole in {:?}", lines[0]);
        }
        assert!(lines.iter().all(|l| l.chars().count() <= 70), "{out}");
    }

    #[test]
    fn tables_align_cut_to_the_width_and_colour_only_the_status() {
        let look = Look { colour: false, width: Some(40), now_ms: 0 };
        let rows = vec![
            vec!["abc".into(), "succeeded".into(), "a-plugin-with-a-really-long-name-indeed".into()],
            vec!["d".into(), "failed".into(), "x".into()],
        ];
        let cols = [keep("ID"), keep("STATUS"), col("PLUGIN")];
        let out = table(&look, &cols, rows.clone());
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "ID   STATUS     PLUGIN");
        assert!(lines[1].starts_with("abc  succeeded  a-plugin"), "{out}");
        assert!(lines[1].ends_with('…') && lines[1].chars().count() <= 40, "{out}");
        assert_eq!(lines[2], "d    failed     x");
        let coloured = table(&Look { colour: true, ..look }, &cols, rows);
        assert!(
            coloured.contains("\u{1b}[32msucceeded\u{1b}[0m") && coloured.contains("\u{1b}[31mfailed"),
            "{coloured}"
        );
        assert!(coloured.lines().next().is_some_and(|h| !h.contains('\u{1b}')), "{coloured}");
    }
}
