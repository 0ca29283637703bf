//! Bytes on disk of a stopped daemon's data dir, by part, for `benches/history`:
//! - segment files (`log/*.seg`): allocated bytes, and the bytes used (up to the last non-zero byte
//!   of each file: segments are preallocated with zeros);
//! - sled (`sled/`): each file's size (`db`, `conf`, `blobs/*`, snapshots), and per tree the entries
//!   and the logical bytes (keys + values) it holds. Trees `log`, `stream_index`, `ops`, `meta` are
//!   the log's index; any other tree with entries (`proj:*`, `projections`: read models an older od
//!   kept in sled) counts as read models, and sled's on-disk bytes are apportioned to the two by
//!   their logical bytes (today sled is all index);
//! - the read models' SQLite database (`read-models.sqlite` and its `-wal`/`-shm`): file sizes, and
//!   per table the rows and logical bytes (keys + values; checkpoints' states);
//! - everything else at the top of the data dir (project directories, content-addressed bodies, …).

use serde_json::{json, Map, Value};
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The read models' database in the data dir (`od::projector::READ_MODELS_FILE`).
const SQLITE_FILE: &str = "read-models.sqlite";

/// Trees that make up the log's index (see `src/store/sled/tables.rs`).
const INDEX_TREES: [&str; 4] = ["log", "stream_index", "ops", "meta"];

/// The data dir's bytes by part.
pub struct Disk {
    pub segments_alloc: u64,
    pub segments_used: u64,
    pub sled_files: u64,
    pub index_logical: u64,
    /// Logical bytes of read models still in sled trees (an older layout).
    pub sled_models_logical: u64,
    /// Bytes of the read models' SQLite files.
    pub sqlite_files: u64,
    /// Logical bytes of every row of the SQLite database.
    pub models_logical: u64,
    pub other: u64,
    pub json: Value,
}

impl Disk {
    /// sled's on-disk bytes apportioned to the index by logical share.
    pub fn index_bytes(&self) -> f64 {
        self.share(self.index_logical)
    }
    /// The read models' bytes on disk: the SQLite files, plus sled's share of any left in sled.
    pub fn models_bytes(&self) -> f64 {
        self.sqlite_files as f64 + self.share(self.sled_models_logical)
    }
    /// Index and read models together (sled and SQLite files).
    pub fn index_and_models(&self) -> u64 {
        self.sled_files + self.sqlite_files
    }
    fn share(&self, part: u64) -> f64 {
        let total = self.index_logical + self.sled_models_logical;
        if total == 0 {
            0.0
        } else {
            self.sled_files as f64 * part as f64 / total as f64
        }
    }
}

/// Offset just past the last non-zero byte of `path`.
fn used_len(path: &Path) -> u64 {
    let mut f = std::fs::File::open(path).expect("open a segment");
    let len = f.metadata().expect("segment metadata").len();
    let mut end = len;
    let mut buf = vec![0u8; 1 << 20];
    while end > 0 {
        let start = end.saturating_sub(buf.len() as u64);
        let n = (end - start) as usize;
        f.seek(SeekFrom::Start(start)).expect("seek");
        f.read_exact(&mut buf[..n]).expect("read a segment");
        if let Some(i) = buf[..n].iter().rposition(|&b| b != 0) {
            return start + i as u64 + 1;
        }
        end = start;
    }
    0
}

fn files_under(p: &Path, base: &Path, out: &mut Map<String, Value>) -> u64 {
    let mut total = 0;
    for e in std::fs::read_dir(p).into_iter().flatten().flatten() {
        let path = e.path();
        let md = e.metadata().expect("metadata");
        if md.is_dir() {
            total += files_under(&path, base, out);
        } else {
            let rel = path.strip_prefix(base).unwrap_or(&path).display().to_string();
            out.insert(rel, json!({ "len": md.len(), "allocated": md.blocks() * 512 }));
            total += md.len();
        }
    }
    total
}

/// Measures `data` (no daemon may be running on it).
pub fn measure(data: &Path) -> Disk {
    let (mut segments_alloc, mut segments_used, mut seg_files) = (0, 0, 0);
    for e in std::fs::read_dir(data.join("log")).expect("log dir").flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "seg") {
            segments_alloc += e.metadata().expect("metadata").blocks() * 512;
            segments_used += used_len(&p);
            seg_files += 1;
        }
    }
    let sled_dir = data.join("sled");
    let mut sled_list = Map::new();
    let sled_files = files_under(&sled_dir, &sled_dir, &mut sled_list);
    let mut other = Map::new();
    let mut other_total = 0;
    for e in std::fs::read_dir(data).expect("data dir").flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if name == "log" || name == "sled" || name.starts_with(SQLITE_FILE) {
            continue;
        }
        let bytes =
            if e.path().is_dir() { crate::common::dir_bytes(&e.path()) } else { e.metadata().map_or(0, |m| m.len()) };
        other.insert(name, json!(bytes));
        other_total += bytes;
    }
    // Trees: opened after the file sizes were taken (opening may write).
    let db = sled::Config::new().path(&sled_dir).open().expect("open sled read-side");
    let mut trees = Map::new();
    let (mut index_logical, mut sled_models_logical) = (0u64, 0u64);
    for name in db.tree_names() {
        let tree = db.open_tree(&name).expect("open tree");
        let (mut n, mut k, mut v) = (0u64, 0u64, 0u64);
        for kv in tree.iter() {
            let (key, val) = kv.expect("tree entry");
            n += 1;
            k += key.len() as u64;
            v += val.len() as u64;
        }
        let name = String::from_utf8_lossy(&name).to_string();
        if INDEX_TREES.contains(&name.as_str()) {
            index_logical += k + v;
        } else {
            sled_models_logical += k + v;
        }
        trees.insert(name, json!({ "entries": n, "key_bytes": k, "value_bytes": v }));
    }
    drop(db);
    let (sqlite_files, sqlite_list) = sqlite_files(data);
    let (models_logical, tables) = sqlite_tables(&data.join(SQLITE_FILE));
    let json = json!({
        "segments": { "files": seg_files, "allocated_bytes": segments_alloc, "used_bytes": segments_used },
        "sled": { "file_bytes": sled_files, "files": sled_list, "trees": trees,
                  "index_trees": INDEX_TREES, "index_logical_bytes": index_logical,
                  "read_model_logical_bytes": sled_models_logical },
        "read_models_sqlite": { "file_bytes": sqlite_files, "files": sqlite_list, "tables": tables,
                                "logical_bytes": models_logical },
        "other_top_level": other,
        "other_bytes": other_total,
    });
    Disk {
        segments_alloc,
        segments_used,
        sled_files,
        index_logical,
        sled_models_logical,
        sqlite_files,
        models_logical,
        other: other_total,
        json,
    }
}

/// The SQLite files' total size and each one's.
fn sqlite_files(data: &Path) -> (u64, Map<String, Value>) {
    let (mut total, mut list) = (0, Map::new());
    for e in std::fs::read_dir(data).expect("data dir").flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if name.starts_with(SQLITE_FILE) {
            let md = e.metadata().expect("metadata");
            list.insert(name, json!({ "len": md.len(), "allocated": md.blocks() * 512 }));
            total += md.len();
        }
    }
    (total, list)
}

/// Rows and logical bytes of every table of the database at `path` (read-only; none if absent).
fn sqlite_tables(path: &Path) -> (u64, Map<String, Value>) {
    let (mut total, mut out) = (0, Map::new());
    if !path.exists() {
        return (0, out);
    }
    let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY;
    let c = rusqlite::Connection::open_with_flags(path, flags).expect("open the read models read-only");
    let names: Vec<String> = c
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")
        .expect("list tables")
        .query_map([], |r| r.get(0))
        .expect("list tables")
        .collect::<Result<_, _>>()
        .expect("table names");
    for t in names {
        let sql = match t.as_str() {
            "checkpoints" => {
                "SELECT count(*), coalesce(sum(length(name)), 0), coalesce(sum(length(state)), 0) FROM checkpoints"
                    .to_string()
            }
            _ => {
                format!("SELECT count(*), coalesce(sum(length(key)), 0), coalesce(sum(length(value)), 0) FROM \"{t}\"")
            }
        };
        let (n, k, v): (i64, i64, i64) =
            c.query_row(&sql, [], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).expect("table sizes");
        total += (k + v) as u64;
        out.insert(t, json!({ "rows": n, "key_bytes": k, "value_bytes": v }));
    }
    (total, out)
}
