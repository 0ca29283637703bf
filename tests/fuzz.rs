//! Fuzzing that runs inside `cargo test`: every parser that reads bytes from outside od, driven by
//! a checked-in corpus (`tests/fixtures/fuzz/<target>/`, replayed on every run) and then by seeded
//! mutations of it. Each input must finish without a panic, within a generous deadline, and with a
//! peak heap bounded by its size (this binary's global allocator counts every byte).
//!
//! `OD_FUZZ_ITERS=<n>` runs n mutations per target (the defaults keep the whole file to seconds in
//! a debug build), `OD_FUZZ_SEED=<n>|random` picks the seed (fixed by default, so CI is
//! reproducible). See `fuzz/harness.rs` for what happens to a failing input.

#[path = "common/mod.rs"]
mod common;

mod fuzz {
    pub mod archive;
    pub mod harness;
    pub mod http;
    pub mod log;
    pub mod mcp;
    pub mod mutate;
    pub mod plugins;
    pub mod seeds;
}

use fuzz::harness::{self, Bounds, Failure};
use std::sync::Arc;
use std::time::Duration;

#[global_allocator]
static ALLOC: harness::Counting = harness::Counting;

// ---- the harness itself can fail -----------------------------------------------------------------

/// The checks are real: an allocation sized by the input, a panic and a hang are each reported.
#[test]
fn the_harness_catches_overallocation_panics_and_hangs() {
    let _serial = harness::serial();
    // A generous deadline for the checks that must not be taken for hangs on a loaded machine; a
    // short one only where a hang is what is being caught.
    let bounds = Bounds { deadline: Duration::from_secs(120), memory: |n| (1 << 20) + 16 * n };
    let hang_bounds = Bounds { deadline: Duration::from_millis(300), ..bounds };
    let trusting_parser: harness::Check = Arc::new(|b: &[u8]| {
        let claimed = u32::from_le_bytes(b[..4].try_into().unwrap()) as usize;
        let mut buf = Vec::<u8>::with_capacity(claimed);
        buf.extend_from_slice(&b[4..]);
        std::hint::black_box(&buf);
    });
    let input = [0, 0, 0, 8, 1, 2, 3];
    assert!(matches!(harness::run_one(&trusting_parser, &input, bounds), Err(Failure::Memory { .. })));
    assert!(harness::run_one(&trusting_parser, &[16, 0, 0, 0, 1], bounds).is_ok());
    let panicking: harness::Check = Arc::new(|b: &[u8]| assert!(b.is_empty(), "boom"));
    assert!(matches!(harness::run_one(&panicking, b"x", bounds), Err(Failure::Panic(m)) if m.contains("boom")));
    let hanging: harness::Check = Arc::new(|_: &[u8]| std::thread::sleep(Duration::from_secs(3600)));
    assert!(matches!(harness::run_one(&hanging, b"", hang_bounds), Err(Failure::Hang(_))));
}

// ---- the log -----------------------------------------------------------------------------------------

#[test]
fn fuzz_frame_decode() {
    let _serial = harness::serial();
    harness::fuzz(fuzz::log::frame_target(), fuzz::log::check_frame);
}

#[test]
fn fuzz_segment_recovery() {
    let _serial = harness::serial();
    let base = Arc::new(fuzz::log::SegmentBase::build());
    let target = fuzz::log::segment_target(&base);
    harness::fuzz(target, move |b| fuzz::log::check_segment(&base, b));
}

// ---- plugins, agents, GenUI ------------------------------------------------------------------------

#[test]
fn fuzz_plugin_folders() {
    let _serial = harness::serial();
    harness::fuzz(fuzz::plugins::plugin_target(), fuzz::plugins::check_plugin);
}

#[test]
fn fuzz_until_grammar() {
    let _serial = harness::serial();
    harness::fuzz(fuzz::plugins::until_target(), fuzz::plugins::check_until);
}

#[test]
fn fuzz_genui_answers() {
    let _serial = harness::serial();
    harness::fuzz(fuzz::plugins::genui_target(), fuzz::plugins::check_genui);
}

#[test]
fn fuzz_agent_protocol_lines() {
    let _serial = harness::serial();
    harness::fuzz(fuzz::plugins::agent_lines_target(), fuzz::plugins::check_agent_lines);
}

// ---- archives ----------------------------------------------------------------------------------------

#[test]
fn fuzz_archive_tar() {
    let _serial = harness::serial();
    use fuzz::archive::{check_archive, target, Kind};
    harness::fuzz(target(Kind::Tar), |b| check_archive(Kind::Tar, b));
}

#[test]
fn fuzz_archive_tar_gz() {
    let _serial = harness::serial();
    use fuzz::archive::{check_archive, target, Kind};
    harness::fuzz(target(Kind::TarGz), |b| check_archive(Kind::TarGz, b));
}

#[test]
fn fuzz_archive_zip() {
    let _serial = harness::serial();
    use fuzz::archive::{check_archive, target, Kind};
    harness::fuzz(target(Kind::Zip), |b| check_archive(Kind::Zip, b));
}

// ---- the wire ----------------------------------------------------------------------------------------

#[test]
fn fuzz_http_resume_points_and_cursors() {
    let _serial = harness::serial();
    let daemon = Arc::new(fuzz::http::Daemon::start());
    let d = daemon.clone();
    harness::fuzz(fuzz::http::target(), move |b| fuzz::http::check_request(&d, b));
    drop(daemon);
}

fn fuzz_mcp(extra: &[&str]) {
    let _serial = harness::serial();
    let server = Arc::new(fuzz::mcp::Server::start(extra));
    let s = server.clone();
    harness::fuzz(fuzz::mcp::target(), move |b| fuzz::mcp::check_lines(&s, b));
    let rss = server.lock().unwrap().peak_rss_kib();
    assert!(rss < 512 * 1024, "od mcp {extra:?} peaked at {rss} KiB resident");
}

#[test]
fn fuzz_mcp_json_rpc() {
    fuzz_mcp(&[]);
}

#[test]
fn fuzz_mcp_flat_json_rpc() {
    fuzz_mcp(&["--flat"]);
}

/// Rewrites the binary seeds of the corpus (frames of every kind, a segment); run by hand.
#[test]
#[ignore]
fn regenerate_binary_seeds() {
    fuzz::seeds::regenerate();
}
