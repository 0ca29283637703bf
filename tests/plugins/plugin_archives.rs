//! Installing plugin archives: good `.tgz` and `.zip` install; archives that climb out with `..`,
//! use absolute paths, carry symlinks, or exceed the file-count or size caps are rejected whole —
//! nothing installed, nothing written outside, no scratch left behind.

use serde_json::Value;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output};

const OD: &str = env!("CARGO_BIN_EXE_od");
pub const SKILL: &[u8] =
    b"---\nname: packed\ndescription: Comes in an archive.\nversion: 2.0.0\n---\n# Packed\n\nDo it.\n";

fn od(dir: &Path, args: &[&str]) -> Output {
    Command::new(OD).args(args).arg("--data-dir").arg(dir).env_remove("OD_DAEMON_URL").output().unwrap()
}

fn last_line(out: &Output) -> Value {
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().last().unwrap_or("null")).unwrap()
}

pub fn installed(data: &Path) -> Vec<String> {
    let list: Value = serde_json::from_slice(&od(data, &["plugin", "list", "--json"]).stdout).unwrap();
    list["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["trust"] != "bundled")
        .map(|p| p["id"].to_string())
        .collect()
}

/// One tar entry to write: name, bytes, kind.
type Entry = (String, Vec<u8>, tar::EntryType);

/// A tar header with a raw name (bypassing the tar crate's own path checks, as an attacker would).
fn raw_header(name: &str, size: u64, kind: tar::EntryType) -> tar::Header {
    let mut h = tar::Header::new_old();
    let bytes = name.as_bytes();
    h.as_old_mut().name[..bytes.len()].copy_from_slice(bytes);
    h.set_size(size);
    h.set_mode(0o644);
    h.set_entry_type(kind);
    h.set_cksum();
    h
}

pub fn tgz(path: &Path, entries: &[(&str, &[u8], tar::EntryType)]) {
    let f = std::fs::File::create(path).unwrap();
    let mut b = tar::Builder::new(flate2::write::GzEncoder::new(f, flate2::Compression::fast()));
    for (name, data, kind) in entries {
        let mut h = raw_header(name, data.len() as u64, *kind);
        if *kind == tar::EntryType::Symlink {
            h.set_size(0);
            h.set_link_name("/etc/passwd").unwrap();
            h.set_cksum();
            b.append(&h, std::io::empty()).unwrap();
        } else {
            b.append(&h, *data).unwrap();
        }
    }
    b.into_inner().unwrap().finish().unwrap();
}

fn zip(path: &Path, entries: &[(&str, &[u8])]) {
    let mut w = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    let opts = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for (name, data) in entries {
        w.start_file(*name, opts).unwrap();
        w.write_all(data).unwrap();
    }
    w.finish().unwrap();
}

#[test]
fn good_archives_install() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let a = tmp.path().join("packed.tgz");
    tgz(
        &a,
        &[
            ("packed-2.0.0/SKILL.md", SKILL, tar::EntryType::Regular),
            ("packed-2.0.0/notes/a.md", b"hi", tar::EntryType::Regular),
        ],
    );
    let out = od(&data, &["plugin", "install", a.to_str().unwrap()]);
    let last = last_line(&out);
    assert_eq!(last["event"], "success", "{last}");
    assert_eq!(last["data"]["plugin"]["id"], "packed");
    assert_eq!(last["data"]["plugin"]["version"], "2.0.0");
    assert!(data.join(last["data"]["plugin"]["fsPath"].as_str().unwrap()).join("notes/a.md").exists());
    let z = tmp.path().join("packed.zip");
    zip(&z, &[("SKILL.md", &SKILL.replace_all_version())]);
    let out = od(&data, &["plugin", "install", z.to_str().unwrap()]);
    assert_eq!(last_line(&out)["data"]["plugin"]["version"], "2.1.0");
    assert!(
        !data.join("tmp").exists() || std::fs::read_dir(data.join("tmp")).unwrap().next().is_none(),
        "no scratch left"
    );
}

trait Bump {
    fn replace_all_version(&self) -> Vec<u8>;
}
impl Bump for &[u8] {
    fn replace_all_version(&self) -> Vec<u8> {
        String::from_utf8_lossy(self).replace("2.0.0", "2.1.0").into_bytes()
    }
}

#[test]
fn hostile_archives_are_rejected_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let outside = tmp.path().join("escaped.md");
    let regular = tar::EntryType::Regular;
    let many: Vec<(String, Vec<u8>)> =
        (0..=od::engine::archive::MAX_ARCHIVE_FILES).map(|i| (format!("p/f{i}.md"), b"x".to_vec())).collect();
    let big = vec![0u8; od::engine::archive::MAX_ARCHIVE_BYTES as usize + 1];
    let cases: Vec<(&str, Vec<Entry>)> = vec![
        (
            "dotdot",
            vec![
                ("p/SKILL.md".into(), SKILL.to_vec(), regular),
                ("p/../../escaped.md".into(), b"pwned".to_vec(), regular),
            ],
        ),
        (
            "absolute",
            vec![
                ("p/SKILL.md".into(), SKILL.to_vec(), regular),
                (outside.display().to_string(), b"pwned".to_vec(), regular),
            ],
        ),
        (
            "symlink",
            vec![("p/SKILL.md".into(), SKILL.to_vec(), regular), ("p/link".into(), vec![], tar::EntryType::Symlink)],
        ),
        (
            "hardlink",
            vec![("p/SKILL.md".into(), SKILL.to_vec(), regular), ("p/hard".into(), vec![], tar::EntryType::Link)],
        ),
        (
            "too-many",
            many.iter()
                .map(|(n, d)| (n.clone(), d.clone(), regular))
                .chain([("p/SKILL.md".to_string(), SKILL.to_vec(), regular)])
                .collect(),
        ),
        ("too-big", vec![("p/SKILL.md".into(), SKILL.to_vec(), regular), ("p/big.bin".into(), big, regular)]),
    ];
    for (name, entries) in &cases {
        let a = tmp.path().join(format!("{name}.tgz"));
        let refs: Vec<(&str, &[u8], tar::EntryType)> =
            entries.iter().map(|(n, d, k)| (n.as_str(), d.as_slice(), *k)).collect();
        tgz(&a, &refs);
        let out = od(&data, &["plugin", "install", a.to_str().unwrap()]);
        let last = last_line(&out);
        assert_eq!(last["data"]["error"]["code"], "bad-archive", "{name}: {last}");
        assert_ne!(out.status.code(), Some(0), "{name}");
    }
    let z = tmp.path().join("dotdot.zip");
    zip(&z, &[("SKILL.md", SKILL), ("../escaped.md", b"pwned")]);
    assert_eq!(
        last_line(&od(&data, &["plugin", "install", z.to_str().unwrap()]))["data"]["error"]["code"],
        "bad-archive"
    );
    assert!(!outside.exists(), "nothing was written outside");
    assert!(installed(&data).is_empty(), "nothing was installed");
    let scratch = data.join("tmp");
    assert!(!scratch.exists() || std::fs::read_dir(&scratch).unwrap().next().is_none(), "no scratch left");
}

/// Serves `files` (path → bytes) over loopback HTTP/1.1 until the test ends; returns the base URL.
pub fn serve(files: Vec<(String, Vec<u8>)>) -> String {
    use std::io::{BufRead, BufReader};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request = String::new();
            reader.read_line(&mut request).unwrap_or(0);
            let target = request.split_whitespace().nth(1).unwrap_or("");
            // A server accepts the absolute form too (RFC 9112 §3.2.2): what ureq 2 sends through
            // a proxy's CONNECT tunnel (`GET https://host:port/path`).
            let path = match target.split_once("://") {
                Some((_, rest)) => rest.find('/').map_or("/", |i| &rest[i..]).to_string(),
                None => target.to_string(),
            };
            let mut line = String::new();
            while reader.read_line(&mut line).map(|n| n > 2).unwrap_or(false) {
                line.clear();
            }
            let mut stream = stream;
            match files.iter().find(|(p, _)| *p == path) {
                Some((_, body)) => {
                    let head =
                        format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
                    let _ = stream.write_all(head.as_bytes()).and_then(|_| stream.write_all(body));
                }
                None => {
                    let _ =
                        stream.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                }
            }
        }
    });
    base
}

#[test]
fn github_and_url_sources_install_restricted() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let gh = tmp.path().join("gh.tgz");
    tgz(
        &gh,
        &[
            ("repo-v1/README.md", b"repo", tar::EntryType::Regular),
            ("repo-v1/plugins/x/SKILL.md", SKILL, tar::EntryType::Regular),
        ],
    );
    let plain = tmp.path().join("plain.tgz");
    tgz(&plain, &[("SKILL.md", &SKILL.replace_all_version(), tar::EntryType::Regular)]);
    let base = serve(vec![
        ("/acme/repo/tar.gz/v1".into(), std::fs::read(&gh).unwrap()),
        ("/dl/plain.tgz".into(), std::fs::read(&plain).unwrap()),
    ]);
    let run = |args: &[&str]| {
        Command::new(OD)
            .args(args)
            .arg("--data-dir")
            .arg(&data)
            .env_remove("OD_DAEMON_URL")
            .env("OD_GITHUB_TARBALL_BASE", &base)
            .output()
            .unwrap()
    };
    let out = run(&["plugin", "install", "github:acme/repo@v1/plugins/x"]);
    let last = last_line(&out);
    assert_eq!(last["event"], "success", "{last} {}", String::from_utf8_lossy(&out.stderr));
    let p = &last["data"]["plugin"];
    assert_eq!(
        (p["id"].as_str(), p["trust"].as_str(), p["sourceKind"].as_str()),
        (Some("packed"), Some("restricted"), Some("github"))
    );
    assert_eq!(p["source"], "github:acme/repo@v1/plugins/x");
    let out = run(&["plugin", "install", &format!("{base}/dl/plain.tgz")]);
    let last = last_line(&out);
    assert_eq!(last["data"]["plugin"]["version"], "2.1.0", "{last}");
    assert_eq!(last["data"]["plugin"]["sourceKind"], "url");
    for (source, code) in [
        (format!("{base}/dl/missing.tgz"), "fetch-failed"),
        ("https://example.invalid/p.tgz".to_string(), "fetch-failed"),
        ("github:acme/repo@v1/plugins/nope".to_string(), "unsupported-source"),
        ("github:acme".to_string(), "unsupported-source"),
        (format!("{base}/dl/page.html"), "unsupported-source"),
    ] {
        let last = last_line(&run(&["plugin", "install", &source]));
        assert_eq!(last["data"]["error"]["code"], code, "{source}: {last}");
    }
}

#[test]
fn directory_entries_count_against_the_entry_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let dirs = od::engine::archive::MAX_ARCHIVE_FILES + 1;
    let z = tmp.path().join("dirs.zip");
    let mut w = zip::ZipWriter::new(std::fs::File::create(&z).unwrap());
    let opts = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    w.start_file("p/SKILL.md", opts).unwrap();
    w.write_all(SKILL).unwrap();
    for i in 0..dirs {
        w.add_directory(format!("p/d{i}/"), opts).unwrap();
    }
    w.finish().unwrap();
    let t = tmp.path().join("dirs.tgz");
    let dir_entries: Vec<(String, Vec<u8>, tar::EntryType)> =
        (0..dirs).map(|i| (format!("p/d{i}/"), vec![], tar::EntryType::Directory)).collect();
    let mut refs: Vec<(&str, &[u8], tar::EntryType)> = vec![("p/SKILL.md", SKILL, tar::EntryType::Regular)];
    refs.extend(dir_entries.iter().map(|(n, d, k)| (n.as_str(), d.as_slice(), *k)));
    tgz(&t, &refs);
    for a in [&z, &t] {
        let out = od(&data, &["plugin", "install", a.to_str().unwrap()]);
        let last = last_line(&out);
        assert_eq!(last["data"]["error"]["code"], "bad-archive", "{}: {last}", a.display());
        assert!(last["data"]["error"]["message"].as_str().unwrap().contains("entries"), "{last}");
    }
    assert!(installed(&data).is_empty(), "nothing was installed");
}
