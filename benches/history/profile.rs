//! `OD_HISTORY_PROFILE=<dir>`: instead of the full bench, for each size of `OD_HISTORY_RUNS`, seed
//! (once) a data dir kept under `<dir>/runs-<n>/data`, warm it up (first start folds, clean stop),
//! start the release daemon on it, run `FIRST_WARMUP` runs, then `PROFILE_RUNS` runs back to back
//! under `perf record --call-graph dwarf -p <daemon pid>` (written to `<dir>/perf-<n>.data`, when `perf` runs), and
//! print each run's POST → first line p50 and the runs/s. The data dirs are kept for reuse;
//! delete `<dir>` when done.

use crate::daemon::{client, one_run, Daemon};
use crate::seed;
use crate::START_DEADLINE;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

const PROFILE_RUNS: usize = 300;

pub fn run(root: &Path, sizes: &[usize]) {
    std::fs::create_dir_all(root).expect("profile dir");
    let cap = root.join("capture");
    let _ = std::fs::remove_dir_all(&cap);
    let template = seed::capture(&cap.join("data"));
    let _ = std::fs::remove_dir_all(&cap);
    for &n in sizes {
        let dir = root.join(format!("runs-{n}")).join("data");
        if n == 0 {
            let _ = std::fs::remove_dir_all(&dir); // empty means empty: not the last profile's runs
        }
        if !dir.join("log").exists() {
            let s = seed::seed(&template, &dir, n);
            println!("seeded {n} runs ({} events) in {:.1} s", s.events, s.secs);
            let d = Daemon::spawn(&dir, START_DEADLINE);
            println!("warm-up start {:.1} ms", d.ready_ms);
            d.stop();
        }
        let d = Daemon::spawn(&dir, START_DEADLINE);
        let agent = client();
        for _ in 0..crate::FIRST_WARMUP {
            one_run(&agent, &d.url);
        }
        let out = root.join(format!("perf-{n}.data"));
        let perf = Command::new("perf")
            // DWARF stacks: the release build has no frame pointers.
            .args(["record", "--call-graph", "dwarf,16384", "-F", "499", "-o"])
            .arg(&out)
            .args(["-p", &d.pid.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok();
        std::thread::sleep(std::time::Duration::from_millis(300));
        let cpu0 = cpu_ms(d.pid);
        let t0 = Instant::now();
        let mut first: Vec<f64> = (0..PROFILE_RUNS).map(|_| one_run(&agent, &d.url).0).collect();
        let secs = t0.elapsed().as_secs_f64();
        let cpu = (cpu_ms(d.pid) - cpu0) / PROFILE_RUNS as f64;
        if let Some(mut p) = perf {
            // SIGINT makes perf write its file and exit.
            unsafe { libc::kill(p.id() as i32, libc::SIGINT) };
            let _ = p.wait();
        }
        first.sort_by(f64::total_cmp);
        println!(
            "{n} runs: {PROFILE_RUNS} runs back to back, {:.1} runs/s; POST -> first line p50 {:.2} ms, p90 {:.2} ms; \
             daemon CPU {cpu:.2} ms per run (user + system)",
            PROFILE_RUNS as f64 / secs,
            first[first.len() / 2],
            first[first.len() * 9 / 10]
        );
        d.stop();
    }
}

/// The process's user + system CPU time so far (ms), from `/proc/<pid>/stat`.
fn cpu_ms(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = after.split_whitespace().map(|x| x.parse().unwrap_or(0.0)).collect();
    let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    // Fields after the name: state is [0], utime [11], stime [12].
    (f.get(11).copied().unwrap_or(0.0) + f.get(12).copied().unwrap_or(0.0)) * 1e3 / tick
}
