//! Damage to acknowledged frames after a kill: a child appends notes one at a time, prints an ack
//! after each, then idles until it is killed with SIGKILL (so nothing is checkpointed and the last
//! acknowledged frame is the last frame of the log). Then the segment is truncated inside that
//! frame, or one byte of it is flipped. That frame was acknowledged, so this is corruption:
//! `od log verify` must exit 78 naming it, and a daemon must refuse to start (exit 78) — never
//! keep the prefix and take new writes. Each damage is tried on its own copy of the killed dir.

use super::*;
use od_events::FrameRef;

const ACKS_ENV: &str = "OD_CRASH_DAMAGE_ACKS";
/// Notes the child acknowledges before it idles.
const ACKS: u64 = 40;

/// Not a test on its own: `acknowledged_damage_after_a_kill_is_corruption` starts and kills it.
#[test]
#[ignore = "child process of acknowledged_damage_after_a_kill_is_corruption"]
fn child_acks_then_idles() {
    let (Some(dir), Some(n)) = (std::env::var_os(DIR_ENV), std::env::var_os(ACKS_ENV)) else {
        return;
    };
    let n: u64 = n.to_str().and_then(|s| s.parse().ok()).expect("a number of acks");
    let store = open_store(Path::new(&dir)).unwrap_or_else(|e| panic!("child: open failed: {e}"));
    let mut out = std::io::stdout().lock();
    for i in 0..n {
        let r = store.append(Append::new(sid("note:damage"), vec![note(&format!("acked note {i}"))])).unwrap();
        writeln!(out, "ack {}", r.last_seq).unwrap();
        out.flush().unwrap();
    }
    writeln!(out, "idle").unwrap();
    out.flush().unwrap();
    std::thread::sleep(CHILD_LIFETIME);
}

/// Runs the child on `data` until it idles, kills it, and returns the last acknowledged seq.
fn ack_then_kill(data: &Path) -> u64 {
    let exe = std::env::current_exe().unwrap();
    let child = Command::new(exe)
        .args(["--exact", "crash::damage::child_acks_then_idles", "--nocapture", "--ignored", "--test-threads=1"])
        .env(DIR_ENV, data)
        .env(ACKS_ENV, ACKS.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn child");
    let mut child = KillOnDrop(child);
    let mut last = 0;
    for line in BufReader::new(child.0.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if let Some(seq) = line.strip_prefix("ack ") {
            last = seq.parse().unwrap();
        } else if line == "idle" {
            break;
        }
    }
    assert_eq!(last, ACKS, "the child acknowledged {last} notes");
    child.0.kill().unwrap();
    let status = child.0.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGKILL));
    last
}

/// Byte range `[start, end)` of the frame of `seq` in a segment (records are
/// `[u32 len][u64 batch first][u64 batch last][frame]`).
fn frame_range(segment: &[u8], seq: u64) -> (usize, usize) {
    let mut at = 0;
    loop {
        let len = u32::from_le_bytes(segment[at..at + 4].try_into().unwrap()) as usize;
        assert!(len > 0, "frame {seq} is not in the segment");
        let (start, end) = (at + 20, at + 20 + len);
        if FrameRef::parse(&segment[start..end]).unwrap().seq() == seq {
            return (start, end);
        }
        at = end;
    }
}

fn od(data: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_od"));
    c.args(args).arg("--data-dir").arg(data).env_remove("OD_DAEMON_URL").env_remove("OD_API_TOKEN");
    c
}

/// `od daemon start --foreground` on a damaged dir must exit 78 by itself (a daemon that starts
/// instead is killed after the deadline and the test fails).
fn daemon_start_exit(data: &Path) -> (Option<i32>, String) {
    let err = data.with_extension("daemon.stderr");
    let child = od(data, &["daemon", "start", "--foreground", "--port", "0", "--json"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let mut child = KillOnDrop(child);
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.0.try_wait().unwrap() {
            break Some(s);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stderr = std::fs::read_to_string(&err).unwrap_or_default();
    (status.and_then(|s| s.code()), stderr)
}

#[test]
fn acknowledged_damage_after_a_kill_is_corruption() {
    let tmp = tempfile::tempdir().unwrap();
    let killed = tmp.path().join("killed");
    let last = ack_then_kill(&killed);
    let segment = "log/00000001.seg";
    let bytes = std::fs::read(killed.join(segment)).unwrap();
    let (start, end) = frame_range(&bytes, last);

    type Damage = Box<dyn Fn(&Path)>;
    let damages: Vec<(&str, Damage)> = vec![
        (
            "truncated inside the last acknowledged frame",
            Box::new(move |seg: &Path| {
                std::fs::OpenOptions::new().write(true).open(seg).unwrap().set_len((start + end) as u64 / 2).unwrap()
            }),
        ),
        (
            "a byte flipped in the last acknowledged frame",
            Box::new(move |seg: &Path| {
                let mut b = std::fs::read(seg).unwrap();
                b[(start + end) / 2] ^= 0x01;
                std::fs::write(seg, b).unwrap();
            }),
        ),
    ];
    let mut problems = Vec::new();
    for (k, (what, damage)) in damages.iter().enumerate() {
        let (for_verify, for_daemon) = (tmp.path().join(format!("verify-{k}")), tmp.path().join(format!("daemon-{k}")));
        for d in [&for_verify, &for_daemon] {
            copy_dir(&killed, d);
            damage(&d.join(segment));
        }
        let out = od(&for_verify, &["log", "verify", "--json"]).output().unwrap();
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        if out.status.code() != Some(78) || report["firstBad"]["seq"] != last {
            problems.push(format!(
                "{what}: `od log verify` exited {:?} with {report} (want 78 naming seq {last}); stderr {}",
                out.status.code(),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let (code, stderr) = daemon_start_exit(&for_daemon);
        if code != Some(78) {
            problems.push(format!("{what}: `od daemon start` exited {code:?} (want 78); stderr {stderr}"));
        }
    }
    assert!(problems.is_empty(), "damage to acknowledged frames went unreported:\n{}", problems.join("\n"));

    // Control: the undamaged killed dir verifies and keeps every acknowledged note.
    let out = od(&killed, &["log", "verify", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let s = open_store(&killed).unwrap();
    assert_eq!(s.last_seq(), last);
}
