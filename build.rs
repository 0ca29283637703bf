//! Build script: records the git commit the binary was built from (`od --version`), or `unknown`
//! when the tree is not a git checkout (a copied or packaged source tree). `OD_GIT_COMMIT` in the
//! build environment overrides it. It also lists every file under `src/http/ui/assets/` for the web UI
//! (`src/http/ui/assets.rs` embeds them), so a new asset needs no registration.

use std::path::{Path, PathBuf};
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string()).filter(|s| !s.is_empty())
}

fn main() {
    println!("cargo:rerun-if-env-changed=OD_GIT_COMMIT");
    let commit = std::env::var("OD_GIT_COMMIT").ok().filter(|c| !c.is_empty()).or_else(|| {
        // Rebuild when HEAD moves: HEAD itself and the ref it points at.
        if let Some(head) = git(&["rev-parse", "--git-path", "HEAD"]) {
            println!("cargo:rerun-if-changed={head}");
        }
        if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]).and_then(|r| git(&["rev-parse", "--git-path", &r])) {
            println!("cargo:rerun-if-changed={r}");
        }
        git(&["rev-parse", "--short=12", "HEAD"])
    });
    println!("cargo:rustc-env=OD_GIT_COMMIT={}", commit.unwrap_or_else(|| "unknown".into()));
    ui_assets();
}

/// Writes `$OUT_DIR/ui_assets.rs`: `[(relative path, include_bytes!(absolute path))]` for every
/// file under `src/http/ui/assets/` (dot files left out), sorted by path; reruns when the folder, a
/// subfolder or a file changes.
fn ui_assets() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let root = Path::new(&manifest).join("src/http/ui/assets");
    println!("cargo:rerun-if-changed={}", root.display());
    let mut files = Vec::new();
    walk(&root, &root, &mut files);
    files.sort();
    let mut out = String::from("&[\n");
    for (rel, abs) in &files {
        println!("cargo:rerun-if-changed={}", abs.display());
        out.push_str(&format!("    ({rel:?}, include_bytes!({:?})),\n", abs.display().to_string()));
    }
    out.push_str("]\n");
    let dest = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("ui_assets.rs");
    std::fs::write(&dest, out).expect("writing ui_assets.rs");
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, PathBuf)>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    println!("cargo:rerun-if-changed={}", dir.display());
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().to_string();
        if name.starts_with('.') {
            continue;
        }
        if path.is_dir() {
            walk(root, &path, out);
        } else if path.is_file() {
            let rel = path.strip_prefix(root).expect("under the root");
            let rel = rel.components().map(|c| c.as_os_str().to_string_lossy().to_string()).collect::<Vec<_>>();
            out.push((rel.join("/"), path));
        }
    }
}
