//! Archive unpacking (`engine::archive::unpack`): tar, tar.gz and zip bytes. An archive is refused
//! whole (nothing left behind) or unpacks to plain files and folders inside the target folder,
//! within the size and count limits; nothing is ever written beside it.

use super::harness::{Bounds, Rng, Target};
use super::mutate::havoc;
use od::engine::archive::{unpack, MAX_ARCHIVE_BYTES, MAX_ARCHIVE_FILES};
use std::io::Write;
use std::path::Path;
use std::time::Duration;

/// Which container an input is tried as: the file name the archive gets.
#[derive(Clone, Copy)]
pub enum Kind {
    Tar,
    TarGz,
    Zip,
}

impl Kind {
    fn file(self) -> &'static str {
        match self {
            Kind::Tar => "in.tar",
            Kind::TarGz => "in.tar.gz",
            Kind::Zip => "in.zip",
        }
    }
    fn target(self) -> &'static str {
        match self {
            Kind::Tar => "archive-tar",
            Kind::TarGz => "archive-tgz",
            Kind::Zip => "archive-zip",
        }
    }
}

/// Walks `dir` without following links: (files, bytes); panics on anything but files and folders.
fn walk(dir: &Path, files: &mut usize, bytes: &mut u64) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let t = std::fs::symlink_metadata(e.path()).unwrap();
        if t.is_dir() {
            walk(&e.path(), files, bytes);
        } else {
            assert!(t.is_file(), "{} is neither a file nor a folder", e.path().display());
            *files += 1;
            *bytes += t.len();
        }
    }
}

pub fn check_archive(kind: Kind, input: &[u8]) {
    let tmp = tempfile::tempdir().unwrap();
    let archive = tmp.path().join(kind.file());
    std::fs::write(&archive, input).unwrap();
    let out = tmp.path().join("out");
    match unpack(&archive, &out) {
        Ok(root) => {
            assert!(root.starts_with(&out), "root {} outside {}", root.display(), out.display());
            let (mut files, mut bytes) = (0, 0);
            walk(&out, &mut files, &mut bytes);
            assert!(files <= MAX_ARCHIVE_FILES && bytes <= MAX_ARCHIVE_BYTES, "{files} files, {bytes} bytes");
        }
        Err(_) => assert!(!out.exists(), "a refused archive leaves nothing behind"),
    }
    let mut beside: Vec<String> =
        std::fs::read_dir(tmp.path()).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into()).collect();
    beside.sort();
    beside.retain(|n| n != "out" && n != kind.file());
    assert!(beside.is_empty(), "written beside the target folder: {beside:?}");
    assert!(!Path::new(ABSOLUTE).exists(), "an absolute entry was written at {ABSOLUTE}");
}

/// Where the corpus's absolute-path entries point.
const ABSOLUTE: &str = "/tmp/od-fuzz-abs.txt";

fn tar_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (path, data) in entries {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_entry_type(if path.ends_with('/') { tar::EntryType::Directory } else { tar::EntryType::Regular });
        b.append_data(&mut h, path, *data).unwrap();
    }
    b.into_inner().unwrap()
}

fn gz(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (path, data) in entries {
        if path.ends_with('/') {
            w.add_directory(*path, zip::write::SimpleFileOptions::default()).unwrap();
        } else {
            w.start_file(*path, zip::write::SimpleFileOptions::default()).unwrap();
            w.write_all(data).unwrap();
        }
    }
    w.finish().unwrap().into_inner()
}

const SKILL: &[u8] = b"---\nname: packed\ndescription: Packed.\n---\n# Packed\n";
const SIDECAR: &[u8] = br#"{"specVersion":"1.0.0","name":"packed","version":"1.0.0","od":{"kind":"skill"}}"#;

/// A plugin folder as each kind of archive (the corpus adds the hostile ones).
pub fn seeds(kind: Kind) -> Vec<(String, Vec<u8>)> {
    let plugin: &[(&str, &[u8])] =
        &[("packed/", b""), ("packed/SKILL.md", SKILL), ("packed/open-design.json", SIDECAR), ("packed/a/b.txt", b"x")];
    let bytes = match kind {
        Kind::Tar => tar_of(plugin),
        Kind::TarGz => gz(&tar_of(plugin)),
        Kind::Zip => zip_of(plugin),
    };
    vec![("built:plugin".into(), bytes)]
}

/// For .tar.gz: usually mutates the tar inside and recompresses (so mutations reach the tar
/// reader), else the compressed bytes.
fn mutate_tgz(rng: &mut Rng, input: &[u8], pool: &[Vec<u8>]) -> Vec<u8> {
    use std::io::Read;
    let mut inner = Vec::new();
    let ok = flate2::read::GzDecoder::new(input).take(1 << 20).read_to_end(&mut inner).is_ok();
    if ok && !rng.one_in(4) {
        return gz(&havoc(rng, &inner, &[]));
    }
    havoc(rng, input, pool)
}

pub fn target(kind: Kind) -> Target {
    Target {
        name: kind.target(),
        iterations: 400,
        // The unpacked bytes go to disk as they are read; the heap holds buffers and headers, and
        // for a zip its central directory: the zip crate reserves room for as many entries as the
        // end record claims, up to u16::MAX (~140 bytes each) whatever the file's size.
        bounds: Bounds { deadline: Duration::from_secs(20), memory: |n| (8 << 20) + 65_535 * 256 + 64 * n },
        seeds: seeds(kind),
        mutate: match kind {
            Kind::TarGz => mutate_tgz,
            _ => havoc,
        },
    }
}

/// Hand-made hostile archives for the corpus: escapes, links, a long-name entry that inflates.
pub fn hostile() -> Vec<(&'static str, Vec<u8>)> {
    let mut out = Vec::new();
    let raw_tar = |name: &[u8], kind: u8, link: &[u8], data: &[u8]| {
        let mut h = tar::Header::new_gnu();
        h.as_old_mut().name[..name.len()].copy_from_slice(name);
        h.as_old_mut().linkname[..link.len()].copy_from_slice(link);
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_entry_type(tar::EntryType::new(kind));
        h.set_cksum();
        let mut b = h.as_bytes().to_vec();
        b.extend_from_slice(data);
        b.resize(b.len().div_ceil(512) * 512, 0);
        b.extend_from_slice(&[0; 1024]);
        b
    };
    out.push(("tar-dotdot.tar", raw_tar(b"../escape.txt", b'0', b"", b"x")));
    out.push(("tar-absolute.tar", raw_tar(ABSOLUTE.as_bytes(), b'0', b"", b"x")));
    out.push(("tar-symlink.tar", raw_tar(b"link", b'2', b"/etc/passwd", b"")));
    out.push(("tar-hardlink.tar", raw_tar(b"hard", b'1', b"../x", b"")));
    out
}

/// A .tar.gz whose first entry is a GNU long-name record of `inflated` zero bytes: a few KiB on
/// the wire, and a name the tar reader holds in memory whole.
pub fn long_name_bomb(inflated: usize) -> Vec<u8> {
    let mut h = tar::Header::new_gnu();
    h.as_old_mut().name[..13].copy_from_slice(b"././@LongLink");
    h.set_size(inflated as u64);
    h.set_mode(0o644);
    h.set_entry_type(tar::EntryType::GNULongName);
    h.set_cksum();
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(h.as_bytes()).unwrap();
    let zeros = vec![b'a'; 1 << 20];
    let mut left = inflated.div_ceil(512) * 512;
    while left > 0 {
        let n = left.min(zeros.len());
        e.write_all(&zeros[..n]).unwrap();
        left -= n;
    }
    e.write_all(&tar_of(&[("x/SKILL.md", SKILL)])).unwrap();
    e.finish().unwrap()
}

/// Zips that must be refused: a symlink, an entry climbing out, an absolute entry.
type Zip = zip::ZipWriter<std::io::Cursor<Vec<u8>>>;

pub fn hostile_zips() -> Vec<(&'static str, Vec<u8>)> {
    let opts = zip::write::SimpleFileOptions::default();
    let one = |f: &dyn Fn(&mut Zip)| {
        let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        f(&mut w);
        w.finish().unwrap().into_inner()
    };
    vec![
        ("zip-symlink.zip", one(&|w| w.add_symlink("link", "/etc/passwd", opts).unwrap())),
        (
            "zip-dotdot.zip",
            one(&|w| {
                w.start_file("a/../../escape.txt", opts).unwrap();
                w.write_all(b"x").unwrap();
            }),
        ),
        (
            "zip-absolute.zip",
            one(&|w| {
                w.start_file(ABSOLUTE, opts).unwrap();
                w.write_all(b"x").unwrap();
            }),
        ),
    ]
}
