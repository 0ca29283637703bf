//! Ending everything an agent started when its invocation ends — by exit, timeout, cancel or
//! daemon stop — so no helper outlives it, holds its pipes open, or survives `od daemon stop`.
//!
//! The agent runs as the leader of its own process group and carries a per-invocation token in its
//! environment ([`TOKEN_VAR`]), which its descendants inherit. [`sweep`] finds, in `/proc`, every
//! live process that started after the agent and is in its group, carries the token (this catches
//! `setsid` and double-forked escapees whose parent is gone), or descends from one of those (this
//! catches a descendant that cleared its environment while its parent lives); it kills them all
//! with SIGKILL (and the group with `killpg`), and repeats until a round finds nothing new.
//!
//! Only processes that started at or after the agent are considered, so a recycled pid of an older
//! process is never signalled.
//!
//! Not caught: a process that left the group (`setsid`/`setpgid`), cleared or replaced its
//! environment (`env -i`) and whose parent chain back to the agent is already gone; a process
//! running as another user (a setuid program: neither its environment nor a signal reaches it);
//! a process in another PID namespace. Without `/proc` (not Linux) only the group is killed.
//! Orphans are reaped by init (od does not make itself a subreaper: it would then have to reap
//! every orphan of every helper it runs, including ones whose exit status tokio waits for).

use std::collections::HashSet;

use crate::limits::AGENT_SWEEP_ROUNDS;

/// The environment variable carrying an invocation's token.
pub const TOKEN_VAR: &str = "OD_INVOCATION_TOKEN";

/// What `/proc/<pid>/stat` says about one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Proc {
    pid: i32,
    ppid: i32,
    pgrp: i32,
    /// Clock ticks after boot.
    start: u64,
    /// A zombie or dead process (nothing to kill, nothing to read).
    gone: bool,
}

/// Parses `/proc/<pid>/stat` (`pid (comm) state ppid pgrp … starttime …`; comm may hold spaces
/// and parentheses, so fields are counted from the last `)`).
fn parse_stat(s: &str) -> Option<Proc> {
    let pid = s.split(' ').next()?.parse().ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(Proc {
        pid,
        ppid: f.get(1)?.parse().ok()?,
        pgrp: f.get(2)?.parse().ok()?,
        start: f.get(19)?.parse().ok()?,
        gone: matches!(*f.first()?, "Z" | "X" | "x"),
    })
}

fn read_stat(pid: i32) -> Option<Proc> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

fn scan() -> Vec<Proc> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.flatten().filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok()).filter_map(read_stat).collect()
}

/// Whether `pid`'s environment holds `needle` (`\0NAME=value\0`).
fn carries(pid: i32, needle: &[u8]) -> bool {
    match std::fs::read(format!("/proc/{pid}/environ")) {
        Ok(mut env) => {
            env.insert(0, 0);
            env.push(0);
            memchr::memmem::find(&env, needle).is_some()
        }
        Err(_) => false,
    }
}

/// The start time (clock ticks after boot) of `pid`, 0 when unknown.
pub fn start_time(pid: u32) -> u64 {
    read_stat(pid as i32).map_or(0, |p| p.start)
}

/// The invocation's processes in `procs`: in group `pgid`, carrying the token, or descending from
/// one of those; never od itself or init, never one that started before the agent.
fn ours(procs: &[Proc], pgid: i32, since: u64, needle: &[u8]) -> HashSet<i32> {
    let me = std::process::id() as i32;
    let candidates: Vec<&Proc> =
        procs.iter().filter(|p| !p.gone && p.pid > 1 && p.pid != me && p.start >= since).collect();
    let mut found: HashSet<i32> =
        candidates.iter().filter(|p| p.pgrp == pgid || carries(p.pid, needle)).map(|p| p.pid).collect();
    loop {
        let before = found.len();
        for p in &candidates {
            // (Not "child of the agent's pid": once the agent is reaped, that pid may be reused.)
            if found.contains(&p.ppid) {
                found.insert(p.pid);
            }
        }
        if found.len() == before {
            return found;
        }
    }
}

fn needle(token: &str) -> Vec<u8> {
    format!("\0{TOKEN_VAR}={token}\0").into_bytes()
}

/// The live processes of the invocation `token` whose agent led group `pgid` and started at
/// `since`: what [`sweep`] would kill (see [`super::orphans`]).
pub fn members(pgid: u32, token: &str, since: u64) -> Vec<i32> {
    ours(&scan(), pgid as i32, since, &needle(token)).into_iter().collect()
}

/// Whether `pid` carries the invocation `token` in its environment.
pub fn carries_token(pid: i32, token: &str) -> bool {
    carries(pid, &needle(token))
}

/// Kills the process group `pgid` (the agent's) and every process of the invocation `token`
/// that started at or after `since` (the agent's start time); returns the pids it signalled.
pub fn sweep(pgid: u32, token: &str, since: u64) -> Vec<i32> {
    let pgid = pgid as i32;
    let needle = needle(token);
    let mut killed = HashSet::new();
    for round in 0..AGENT_SWEEP_ROUNDS {
        // Found before the group dies, so parent links still lead from the agent to escapees.
        let found = ours(&scan(), pgid, since, &needle);
        if round == 0 && pgid > 1 {
            // SAFETY: killpg only sends a signal; a group that is gone gives ESRCH, ignored.
            unsafe { libc::killpg(pgid, libc::SIGKILL) };
        }
        let fresh: Vec<i32> = found.into_iter().filter(|p| !killed.contains(p)).collect();
        if fresh.is_empty() {
            break;
        }
        for pid in fresh {
            // SAFETY: kill only sends a signal; a process that is gone gives ESRCH, ignored.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            killed.insert(pid);
        }
    }
    killed.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_parse_even_with_odd_names() {
        let line = "4242 (we(ird) name) S 17 4242 17 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 987654 1000 1 0";
        assert_eq!(parse_stat(line), Some(Proc { pid: 4242, ppid: 17, pgrp: 4242, start: 987654, gone: false }));
        let zombie = "7 (sh) Z 1 5 5 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 12 0 0";
        assert!(parse_stat(zombie).unwrap().gone);
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn the_group_tokens_and_descendants_are_ours_and_nothing_older() {
        let p = |pid, ppid, pgrp, start| Proc { pid, ppid, pgrp, start, gone: false };
        let procs = [
            p(100, 1, 100, 50),   // the agent
            p(101, 100, 100, 51), // its background child
            p(102, 1, 102, 52),   // escaped (setsid), parent gone: only the token finds it (not here)
            p(103, 101, 103, 53), // escaped, parent alive: found through its parent
            p(104, 103, 104, 54), // and its child
            p(90, 1, 100, 10),    // older than the agent: never ours
            p(200, 1, 200, 60),   // unrelated
        ];
        let found = ours(&procs, 100, 50, b"\0never-in-any-environment\0");
        let mut found: Vec<i32> = found.into_iter().collect();
        found.sort();
        assert_eq!(found, [100, 101, 103, 104]);
    }
}
