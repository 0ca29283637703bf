//! Read models with a real daemon process: after `kill -9` the restarted daemon serves the same
//! lists and its records equal a fold of the log; and an idle daemon's anonymous memory (RssAnon in
//! /proc) does not grow while its runs are listed and watched repeatedly.

use od::projector::{fold_records_until, RecordProjector};
use od::store::{SledLog, StoreConfig};
use od_projections::{Browser, Workspace};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

const OD: &str = env!("CARGO_BIN_EXE_od");
const TOKEN: &str = "read-models-test-token";

struct Daemon {
    child: Child,
    url: String,
}

impl Daemon {
    fn start(dir: &Path) -> Daemon {
        let mut child = Command::new(OD)
            .args(["daemon", "start", "--foreground", "--port", "0", "--json", "--data-dir"])
            .arg(dir)
            .env_remove("OD_DAEMON_URL")
            .env("OD_API_TOKEN", TOKEN)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
        let v: Value = serde_json::from_str(&line).unwrap_or_else(|_| panic!("first line is JSON: {line:?}"));
        Daemon { child, url: v["url"].as_str().unwrap().to_string() }
    }

    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let req =
            ureq::request(method, &format!("{}{path}", self.url)).set("Authorization", &format!("Bearer {TOKEN}"));
        let res = match body {
            Some(b) => req.send_json(b),
            None => req.call(),
        };
        res.unwrap_or_else(|e| panic!("{method} {path}: {e}")).into_json().unwrap()
    }

    /// Starts a run and reads its watch stream to the end.
    fn run(&self) -> String {
        let v = self.call("POST", "/api/runs", Some(json!({})));
        let id = v["runId"].as_str().unwrap().to_string();
        self.watch(&id);
        id
    }

    fn watch(&self, id: &str) {
        let r = ureq::get(&format!("{}/api/runs/{id}/watch", self.url))
            .set("Authorization", &format!("Bearer {TOKEN}"))
            .call()
            .unwrap();
        for line in BufReader::new(r.into_reader()).lines() {
            let line = line.unwrap();
            if line.contains("\"event\":\"end\"") {
                return;
            }
        }
    }

    /// RssAnon of the process, in kB.
    fn rss_anon_kb(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with("RssAnon:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    fn kill9(mut self) {
        self.child.kill().unwrap(); // SIGKILL
        self.child.wait().unwrap();
    }

    fn stop(mut self) {
        let _ = ureq::post(&format!("{}/api/daemon/stop", self.url))
            .set("Authorization", &format!("Bearer {TOKEN}"))
            .send_json(json!({}));
        self.child.wait().unwrap();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn after_kill_9_the_records_resume_consistently_and_equal_a_rebuild() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let d = Daemon::start(&data);
    for _ in 0..6 {
        d.run();
    }
    let before = d.call("GET", "/api/runs?limit=1000", None);
    let projects = d.call("GET", "/api/projects?limit=1000", None);
    d.kill9();
    let d = Daemon::start(&data);
    assert_eq!(d.call("GET", "/api/runs?limit=1000", None), before);
    assert_eq!(d.call("GET", "/api/projects?limit=1000", None), projects);
    d.run();
    d.kill9();
    let d = Daemon::start(&data);
    assert_eq!(d.call("GET", "/api/runs?limit=1000", None)["runs"].as_array().unwrap().len(), 7);
    d.stop();
    let store = SledLog::open(StoreConfig::new(&data)).unwrap();
    let ws = RecordProjector::<Workspace>::load(&(store.clone() as od::store::Store)).unwrap();
    assert!(ws.resumed_from() > 0, "a clean stop left no checkpoint");
    assert_eq!(ws.dump().unwrap(), fold_records_until::<Workspace>(&*store, u64::MAX).unwrap());
    let br = RecordProjector::<Browser>::load(&(store.clone() as od::store::Store)).unwrap();
    assert_eq!(br.dump().unwrap(), fold_records_until::<Browser>(&*store, u64::MAX).unwrap());
}

#[test]
fn an_idle_daemon_does_not_grow_while_runs_are_listed_and_watched() {
    let tmp = tempfile::tempdir().unwrap();
    let d = Daemon::start(&tmp.path().join("data"));
    let ids: Vec<String> = (0..60).map(|_| d.run()).collect();
    let rounds = 8;
    let mut rss = Vec::new();
    for _ in 0..rounds {
        // Every page of the runs and projects, each run shown, and its stream watched again.
        for list in ["/api/runs", "/api/projects"] {
            let mut cursor = String::new();
            loop {
                let v = d.call("GET", &format!("{list}?limit=7{cursor}"), None);
                match v["nextCursor"].as_str() {
                    Some(c) => cursor = format!("&cursor={c}"),
                    None => break,
                }
            }
        }
        for id in &ids {
            d.call("GET", &format!("/api/runs/{id}"), None);
        }
        for id in ids.iter().take(20) {
            d.watch(id);
        }
        rss.push(d.rss_anon_kb());
    }
    eprintln!("RssAnon after each round of listing and watching (kB): {rss:?}");
    // The first round warms caches (allocator arenas, sled's bounded page cache); after it, reads
    // allocate and free — nothing a read does stays.
    let (first, last) = (rss[1], rss[rounds - 1]);
    assert!(last * 100 <= first * 110, "RssAnon grew from {first} kB to {last} kB while the daemon only served reads");
}
