//! `od --version` (with the commit it was built from), `od completions <shell>` and `od man`,
//! generated from the parser's own definitions.

use std::process::Command;

const OD: &str = env!("CARGO_BIN_EXE_od");

fn stdout(args: &[&str]) -> String {
    let out = Command::new(OD).args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn version_names_the_package_version_and_the_commit() {
    let v = stdout(&["--version"]);
    let want = format!("od {} (commit ", env!("CARGO_PKG_VERSION"));
    assert!(v.starts_with(&want), "{v}");
    let commit = v.trim_end().trim_start_matches(&want).trim_end_matches(')');
    // A git checkout gives the short hash; a copied tree (CI's clone copy) says so.
    assert!(commit == "unknown" || (commit.len() == 12 && commit.bytes().all(|b| b.is_ascii_hexdigit())), "{commit:?}");
}

#[test]
fn completions_cover_every_subcommand_in_each_shell() {
    let bash = stdout(&["completions", "bash"]);
    for sub in ["daemon", "run", "plugin", "ui", "tools", "open", "completions", "man"] {
        assert!(bash.contains(sub), "bash completion lacks {sub}");
    }
    assert!(bash.contains("--follow") && bash.contains("--no-browser"), "nested flags are completed too");
    assert!(stdout(&["completions", "zsh"]).starts_with("#compdef od"));
    assert!(stdout(&["completions", "fish"]).contains("complete -c od"));
    let bad = Command::new(OD).args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2), "an unknown shell is a usage error");
}

#[test]
fn the_man_page_is_roff_for_od_with_its_subcommands() {
    let man = stdout(&["man"]);
    assert!(man.contains(".TH od 1"), "{}", &man[..200.min(man.len())]);
    assert!(man.contains(".SH SUBCOMMANDS") && man.contains("daemon"), "lists the subcommands");
    assert!(man.contains("od\\-open"), "`od open` (the web UI) is listed");
}
