//! SSE and ND-JSON tails of runs and projects: resume with `Last-Event-ID` / `?after=N` at every
//! position of a finished and of a live run (no gap, no duplicate, clean end), the same events as
//! the ND-JSON watch, 1,000 subscribers on one run, a stalled subscriber (it falls back to the log;
//! the writer and the other subscribers never wait for it), a project's stream across its runs by
//! global seq, keep-alive comments, and the refusals.

use crate::common;
mod sse_client;

use common::harness::{names, Engine};
use od::http::tail::StreamTail;
use od::store::{Append, EventLog, SledLog, StoreConfig};
use serde_json::{json, Value};
use sse_client::{addr_of, SseConn, SseEvent};
use std::path::{Path, PathBuf};
use std::process::Command;

const NOW: i64 = 1_800_000_000_000;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    Command::new("chmod").arg("+x").arg(&p).status().unwrap();
    p
}

fn exec(agent: &Path, env: Value) -> Value {
    json!({ "agent": "exec", "agentCommand": [agent.to_str().unwrap()], "agentProtocol": "od", "agentEnv": env })
}

/// Opens an SSE request and checks it is a 200 event stream.
async fn sse(addr: &str, path: &str, headers: &[(&str, &str)]) -> SseConn {
    let c = SseConn::open(addr, path, headers).await.unwrap();
    assert_eq!(c.status, 200, "{path}");
    assert_eq!(c.header("content-type"), Some("text/event-stream"));
    assert_eq!(c.header("cache-control"), Some("no-cache"));
    c
}

fn ids(ev: &[SseEvent]) -> Vec<u64> {
    ev.iter().map(SseEvent::n).collect()
}

fn status_of(addr: &str, path: &str, headers: &[(&str, &str)]) -> u16 {
    rt().block_on(async { SseConn::open(addr, path, headers).await.unwrap().status })
}

#[test]
fn resume_at_every_position_of_a_finished_run_gives_exactly_the_rest() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let (id, watched) = e.run(json!({ "pluginId": "od-new-generation",
        "inputs": { "topic": "tea", "audience": "x", "artifactKind": "landing page" } }));
    let addr = addr_of(&e.url);
    let path = format!("/api/runs/{id}/events");
    let rt = rt();
    let full = rt.block_on(async { sse(&addr, &path, &[]).await.collect().await.unwrap() });
    let last = full.last().unwrap().n();
    assert_eq!(ids(&full), (1..=last).collect::<Vec<_>>(), "ids are the run's event ids, from 1 (0 is run_created)");
    assert_eq!(full.iter().map(|e| e.event.clone()).collect::<Vec<_>>(), names(&watched), "same events as the watch");
    for (f, w) in full.iter().zip(&watched) {
        assert_eq!(f.json(), w["data"]);
    }
    assert_eq!(full.last().unwrap().event, "end");
    rt.block_on(async {
        for n in 0..last {
            let by_header = sse(&addr, &path, &[("Last-Event-ID", &n.to_string())]).await.collect().await.unwrap();
            assert_eq!(by_header, full[n as usize..], "Last-Event-ID: {n}");
            let by_query = sse(&addr, &format!("{path}?after={n}"), &[]).await.collect().await.unwrap();
            assert_eq!(by_query, full[n as usize..], "?after={n}");
            // The header wins over the query (EventSource keeps the URL it started with).
            let both = sse(&addr, &format!("{path}?after=0"), &[("Last-Event-ID", &n.to_string())]).await;
            assert_eq!(both.collect().await.unwrap(), full[n as usize..]);
        }
    });
    // Nothing after the end: 204, so EventSource stops reconnecting.
    assert_eq!(status_of(&addr, &path, &[("Last-Event-ID", &last.to_string())]), 204);
    // The ND-JSON watch resumes the same way and can carry the ids.
    for n in [0, 7, last - 1, last] {
        let body = ureq::get(&format!("{}/api/runs/{id}/watch?after={n}&ids=true", e.url)).call().unwrap();
        let lines: Vec<Value> = body.into_string().unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let want: Vec<Value> =
            full[n as usize..].iter().map(|f| json!({ "id": f.n(), "event": f.event, "data": f.json() })).collect();
        assert_eq!(lines, want, "watch?after={n}&ids=true");
    }
    let plain = ureq::get(&format!("{}/api/runs/{id}/watch", e.url)).set("Last-Event-ID", "50").call().unwrap();
    let first: Value = serde_json::from_str(plain.into_string().unwrap().lines().next().unwrap()).unwrap();
    assert_eq!(first, json!({ "event": full[50].event, "data": full[50].json() }), "two keys without ids");
}

#[test]
fn resume_at_every_position_of_a_live_run() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let agent = script(
        tmp.path(),
        "slow.sh",
        r#"cat >/dev/null
i=0; while [ $i -lt 40 ]; do echo "{\"type\":\"text\",\"text\":\"line $i\"}"; i=$((i+1)); sleep 0.005; done"#,
    );
    let id = e.start_run(exec(&agent, json!({})));
    let addr = addr_of(&e.url);
    let path = format!("/api/runs/{id}/events");
    let rt = rt();
    // A client that drops the connection after every single event and resumes from it.
    let (chain, live_connects) = rt.block_on(async {
        let mut got: Vec<SseEvent> = Vec::new();
        let mut live = 0;
        loop {
            let last = got.last().map(|e| e.n().to_string());
            let headers: Vec<(&str, &str)> = last.iter().map(|l| ("Last-Event-ID", l.as_str())).collect();
            let mut c = sse(&addr, &path, &headers).await;
            let ev = c.next().await.unwrap().expect("an event after the resume point");
            drop(c);
            let end = ev.event == "end";
            got.push(ev);
            if end {
                break;
            }
            if e.get(&format!("/api/runs/{id}")).1["run"]["status"] == "running" {
                live += 1;
            }
        }
        (got, live)
    });
    let full = rt.block_on(async { sse(&addr, &path, &[]).await.collect().await.unwrap() });
    assert_eq!(chain, full, "one event per connection, resumed each time: nothing lost, nothing twice");
    assert_eq!(ids(&chain), (1..=chain.len() as u64).collect::<Vec<_>>());
    assert!(live_connects > 20, "most resumes happened while the run was live ({live_connects})");
}

#[test]
fn a_thousand_subscribers_on_one_run_all_get_every_event() {
    const SUBSCRIBERS: usize = 1000;
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let gate = tmp.path().join("gate");
    let agent = script(
        tmp.path(),
        "gated.sh",
        r#"cat >/dev/null
echo '{"type":"text","text":"waiting"}'
while [ ! -e "$GATE" ]; do sleep 0.01; done
i=0; while [ $i -lt 50 ]; do echo "{\"type\":\"text\",\"text\":\"line $i\"}"; i=$((i+1)); done"#,
    );
    let id = e.start_run(exec(&agent, json!({ "GATE": gate.to_str().unwrap() })));
    let addr = addr_of(&e.url);
    let path = format!("/api/runs/{id}/events");
    let rt = rt();
    let results = rt.block_on(async {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut tasks = Vec::new();
        for _ in 0..SUBSCRIBERS {
            let mut c = sse(&addr, &path, &[]).await;
            let tx = tx.clone();
            tasks.push(tokio::spawn(async move {
                let first = c.next().await.unwrap().unwrap();
                tx.send(()).unwrap();
                let mut got = vec![first];
                got.extend(c.collect().await.unwrap());
                got
            }));
        }
        for _ in 0..SUBSCRIBERS {
            rx.recv().await.unwrap();
        }
        // Everyone is connected and has read the backlog; the rest is delivered live.
        std::fs::write(&gate, "go").unwrap();
        let mut all = Vec::new();
        for t in tasks {
            all.push(t.await.unwrap());
        }
        all
    });
    let watched = e.watch(&id);
    assert!(watched.len() > 50, "the run produced its lines");
    let want: Vec<String> = names(&watched);
    for (i, got) in results.iter().enumerate() {
        assert_eq!(ids(got), (1..=got.len() as u64).collect::<Vec<_>>(), "subscriber {i}");
        assert_eq!(got.iter().map(|e| e.event.clone()).collect::<Vec<_>>(), want, "subscriber {i}");
    }
    assert!(results.windows(2).all(|w| w[0] == w[1]), "every subscriber saw the same events");
}

/// A TCP connection with a tiny receive buffer, so a client that does not read stalls the server
/// quickly.
fn small_buffer_connect(url: &str) -> tokio::net::TcpStream {
    use std::os::fd::FromRawFd;
    let addr: std::net::SocketAddrV4 = addr_of(url).parse().unwrap();
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        assert!(fd >= 0);
        let size: libc::c_int = 4096;
        let p = &size as *const libc::c_int as *const libc::c_void;
        libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, p, std::mem::size_of::<libc::c_int>() as u32);
        let sa = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: addr.port().to_be(),
            sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(addr.ip().octets()) },
            sin_zero: [0; 8],
        };
        let r = libc::connect(fd, &sa as *const _ as *const libc::sockaddr, std::mem::size_of_val(&sa) as u32);
        assert_eq!(r, 0, "connect");
        let s = std::net::TcpStream::from_raw_fd(fd);
        s.set_nonblocking(true).unwrap();
        tokio::net::TcpStream::from_std(s).unwrap()
    }
}

#[test]
fn a_stalled_subscriber_slows_neither_the_writer_nor_the_others_and_gets_everything_later() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let (g1, g2) = (tmp.path().join("g1"), tmp.path().join("g2"));
    // ~7 MB of text after the first gate: more than the stalled client's socket buffers (Linux
    // grows a send buffer to 4 MB at most), and under one invocation's output bound (8 MiB).
    let agent = script(
        tmp.path(),
        "big.sh",
        r#"cat >/dev/null
if [ -e "$G2" ]; then echo '{"type":"text","text":"a later stage"}'; exit 0; fi
line=$(printf '%3500s' '' | tr ' ' x)
while [ ! -e "$G1" ]; do sleep 0.01; done
i=0; while [ $i -lt 2000 ]; do echo "{\"type\":\"text\",\"text\":\"$i $line\"}"; i=$((i+1)); done
while [ ! -e "$G2" ]; do sleep 0.01; done
echo '{"type":"text","text":"done"}'"#,
    );
    let id = e.start_run(exec(&agent, json!({ "G1": g1.to_str().unwrap(), "G2": g2.to_str().unwrap() })));
    let addr = addr_of(&e.url);
    let path = format!("/api/runs/{id}/events");
    let rt = rt();
    rt.block_on(async {
        let stalled = SseConn::open_on(small_buffer_connect(&e.url), &addr, &path, &[]).await.unwrap();
        let mut active = sse(&addr, &path, &[]).await;
        let (big_seen, big_done) = tokio::sync::oneshot::channel();
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            let mut big_seen = Some(big_seen);
            while let Some(ev) = active.next().await.unwrap() {
                if ev.data.contains("\"1999 x") {
                    if let Some(s) = big_seen.take() {
                        let _ = s.send(());
                    }
                }
                got.push(ev);
            }
            got
        });
        std::fs::write(&g1, "go").unwrap();
        big_done.await.unwrap();
        // The active subscriber has all 7 MB; the stalled one has read nothing. Now well over the
        // live buffer's 1,024 batches reach the log (notes are not on the wire, but each append is
        // a published batch), each acknowledged without waiting for anyone.
        let post = note_poster(&e.url);
        for i in 0..1100 {
            post(json!({ "stream": format!("note:filler-{id}"), "text": format!("filler {i}") }));
        }
        std::fs::write(&g2, "go").unwrap();
        let seen = reader.await.unwrap();
        assert_eq!(seen.last().unwrap().event, "end", "the active subscriber finished while the other stalled");
        let late = stalled.collect().await.unwrap();
        assert!(late == seen, "the stalled subscriber, once it reads, gets every event in order");
        // (The notes took run event ids too, but are not on the wire: ids increase, with gaps.)
        assert!(ids(&late).windows(2).all(|w| w[0] < w[1]));
        assert!(late.len() > 2000);
    });
}

/// A blocking JSON POST to `/api/log/notes` (asserting 200).
fn note_poster(url: &str) -> impl Fn(Value) + '_ {
    move |body| {
        let r = ureq::post(&format!("{url}/api/log/notes")).send_json(body).unwrap();
        assert_eq!(r.status(), 200);
    }
}

#[test]
fn a_stream_tail_that_falls_behind_the_live_buffer_rereads_its_stream_and_misses_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cfg = StoreConfig::new(tmp.path());
    cfg.segment_bytes = od::limits::MIN_SEGMENT_BYTES;
    cfg.subscriber_buffer = 4;
    let store = SledLog::open(cfg).unwrap();
    let rt = rt();
    rt.block_on(async {
        let mut stalled = StreamTail::new(&(store.clone() as od::store::Store), "run:a".into(), 0);
        let mut active = StreamTail::new(&(store.clone() as od::store::Store), "run:a".into(), 0);
        let mut active_got = Vec::new();
        for i in 0..200u64 {
            for s in ["run:a", "run:b"] {
                store.append_async(Append::new(common::sid(s), vec![common::note(&format!("{s} {i}"))])).await.unwrap();
            }
            while let Some(f) = active.try_next() {
                active_got.push(f.unwrap().view().version());
            }
        }
        let mut late = Vec::new();
        while let Some(f) = stalled.try_next() {
            late.push(f.unwrap().view().version());
        }
        assert_eq!(active_got, (0..200).collect::<Vec<_>>(), "the polled tail kept up");
        assert_eq!(late, (0..200).collect::<Vec<_>>(), "the stalled tail got every event once, in order");
        assert!(stalled.fallbacks > 0, "it went back to the stream's index");
        assert_eq!(store.last_seq(), 400, "the writer never waited");
        // Live again: new frames arrive through the broadcast.
        store.append_async(Append::new(common::sid("run:a"), vec![common::note("more")])).await.unwrap();
        assert_eq!(stalled.next().await.unwrap().unwrap().view().version(), 200);
    });
}

#[test]
fn a_projects_stream_carries_its_runs_in_log_order_and_resumes_by_global_seq() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    for p in ["p", "q"] {
        let (code, v) = e.post("/api/projects", json!({ "id": p, "name": p }));
        assert_eq!(code, 200, "{v}");
    }
    let addr = addr_of(&e.url);
    let rt = rt();
    // A live subscriber from the start.
    let live = rt.block_on(sse(&addr, "/api/projects/p/events", &[]));
    let live_task = rt.spawn(async move {
        let mut c = live;
        let mut got = Vec::new();
        let mut ends = 0;
        while ends < 2 {
            let ev = c.next().await.unwrap().unwrap();
            ends += usize::from(ev.event == "end");
            got.push(ev);
        }
        got
    });
    let (r1, _) = e.run(json!({ "projectId": "p" }));
    let (_, _) = e.run(json!({ "projectId": "q" }));
    let (r2, _) = e.run(json!({ "projectId": "p" }));
    let live = rt.block_on(live_task).unwrap();
    let full = rt.block_on(async {
        let mut c = sse(&addr, "/api/projects/p/events", &[]).await;
        let mut got = Vec::new();
        while got.len() < live.len() {
            got.push(c.next().await.unwrap().unwrap());
        }
        got
    });
    assert_eq!(live, full, "live and backlog agree");
    let seqs = ids(&full);
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "global seqs, increasing");
    let run_of = |ev: &SseEvent| ev.json()["runId"].as_str().map(String::from);
    assert_eq!(full[0].event, "project_created");
    assert!(
        full.iter().all(|ev| ev.event.starts_with("project_")
            || ev.event.starts_with("conversation_")
            || run_of(ev).is_some_and(|r| r == r1 || r == r2)),
        "only project p's runs"
    );
    let created: Vec<String> =
        full.iter().filter(|ev| ev.event == "run_created").map(|ev| run_of(ev).unwrap()).collect();
    assert_eq!(created, [r1.clone(), r2.clone()]);
    let watched1 = e.watch(&r1);
    let of_r1: Vec<String> = full
        .iter()
        .filter(|ev| run_of(ev).as_deref() == Some(&r1) && ev.event != "run_created")
        .map(|ev| ev.event.clone())
        .collect();
    assert_eq!(of_r1, names(&watched1), "a run's events are all there");
    // Resume at every position: exactly the rest.
    rt.block_on(async {
        for (i, ev) in full.iter().enumerate().step_by(7) {
            let mut c = sse(&addr, "/api/projects/p/events", &[("Last-Event-ID", &ev.n().to_string())]).await;
            let mut got = Vec::new();
            while got.len() < full.len() - i - 1 {
                got.push(c.next().await.unwrap().unwrap());
            }
            assert_eq!(got, full[i + 1..], "after {}", ev.n());
        }
    });
    // Deleting the project ends its stream.
    let last = full.last().unwrap().n().to_string();
    let mut tail = rt.block_on(sse(&addr, "/api/projects/p/events", &[("Last-Event-ID", &last)]));
    let (code, v) = e.delete("/api/projects/p");
    assert_eq!(code, 200, "{v}");
    let rest = rt.block_on(async { tail.until("project_deleted").await.unwrap() });
    assert_eq!(rest.last().unwrap().event, "project_deleted");
    assert!(rt.block_on(tail.next()).unwrap().is_none(), "then the stream ends");
}

#[test]
fn an_idle_stream_sends_keep_alive_comments() {
    // (Process-wide: other tests' clients skip comments, so a short interval only adds a few.)
    std::env::set_var("OD_SSE_KEEPALIVE_MS", "200");
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let gate = tmp.path().join("gate");
    let agent = script(
        tmp.path(),
        "idle.sh",
        "cat >/dev/null
while [ ! -e \"$GATE\" ]; do sleep 0.01; done",
    );
    let id = e.start_run(exec(&agent, json!({ "GATE": gate.to_str().unwrap() })));
    let addr = addr_of(&e.url);
    rt().block_on(async {
        let mut c = sse(&addr, &format!("/api/runs/{id}/events"), &[]).await;
        c.until("start").await.unwrap();
        let idle = tokio::time::timeout(std::time::Duration::from_millis(1000), c.next()).await;
        assert!(idle.is_err(), "no event while the agent waits");
        assert!(c.comments >= 2, "keep-alive comments while idle ({})", c.comments);
    });
    std::fs::write(&gate, "go").unwrap();
}

#[test]
fn refusals_name_what_is_wrong() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let (id, ev) = e.run(json!({}));
    let last = ev.len() as u64;
    let addr = addr_of(&e.url);
    let code = |path: &str, h: &[(&str, &str)]| status_of(&addr, path, h);
    assert_eq!(code("/api/runs/nope/events", &[]), 404);
    assert_eq!(code("/api/projects/nope/events", &[]), 404);
    assert_eq!(code(&format!("/api/runs/{id}/events"), &[("Last-Event-ID", "x")]), 400);
    assert_eq!(code(&format!("/api/runs/{id}/events?after=x"), &[]), 400);
    assert_eq!(code(&format!("/api/runs/{id}/events?after={}", last + 1), &[]), 400, "an id the run never had");
    assert_eq!(code(&format!("/api/runs/{id}/events?after={last}"), &[]), 204);
    assert_eq!(code(&format!("/api/runs/{id}/watch?after={}", last + 1), &[]), 400);
    assert_eq!(code("/api/projects/nope/events?after=999999", &[]), 404);
    let body = ureq::get(&format!("{}/api/runs/{id}/watch?after={last}", e.url)).call().unwrap();
    assert_eq!(body.into_string().unwrap(), "", "a finished run with nothing after the point: an empty body");
}
