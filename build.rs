//! Build script: records the git commit the binary was built from (`od --version`), or `unknown`
//! when the tree is not a git checkout (a copied or packaged source tree). `OD_GIT_COMMIT` in the
//! build environment overrides it.

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
}
