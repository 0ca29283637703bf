//! The threads a batch of fsyncs is issued from ([`super::Syncs::commit`]): started on the first
//! batch of more than one and kept for the process, so a batch costs no thread start.
//!
//! Fsyncs issued together are committed together by the file system's journal, which is why a
//! batch is spread over threads at all. Starting (and joining) a thread per chunk at every batch
//! was ~12 thread starts per dry run (a run's blobs, then its project copies, each files then
//! folders), a cost of its own on a 2-core machine (issue 33). The pool holds
//! `MAX_SYNC_THREADS - 1` threads: the caller works through the first chunk itself. A chunk owns
//! what it syncs (the batch is consumed by its commit), so nothing borrowed crosses a thread.

use std::io;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, LazyLock, Mutex};

use crate::limits::MAX_SYNC_THREADS;

type Task = Box<dyn FnOnce() + Send + 'static>;

/// Where tasks are queued; the pool's threads take them in turn.
static POOL: LazyLock<Mutex<Sender<Task>>> = LazyLock::new(|| {
    let (tx, rx) = channel::<Task>();
    let rx = Arc::new(Mutex::new(rx));
    for n in 1..MAX_SYNC_THREADS {
        let rx = rx.clone();
        // A pool that could not start a thread still works: the remaining ones (or, with none,
        // the caller, see `run`) take every task.
        let _ = std::thread::Builder::new().name(format!("od-fsync-{n}")).spawn(move || worker(&rx));
    }
    Mutex::new(tx)
});

fn worker(rx: &Mutex<Receiver<Task>>) {
    loop {
        let task = match rx.lock().unwrap_or_else(|e| e.into_inner()).recv() {
            Ok(t) => t,
            Err(_) => return,
        };
        task();
    }
}

/// Runs `f` over every item, spread over the pool in up to `MAX_SYNC_THREADS` chunks (the first
/// on the calling thread; one item: just inline), and returns when all are done: the first error,
/// or a panic in `f` as an error.
pub(super) fn run<T: Send + 'static>(items: Vec<T>, f: fn(&T) -> io::Result<()>) -> io::Result<()> {
    if items.len() <= 1 {
        return items.iter().try_for_each(f);
    }
    let per = items.len().div_ceil(MAX_SYNC_THREADS);
    let mut chunks: Vec<Vec<T>> = Vec::new();
    let mut it = items.into_iter().peekable();
    while it.peek().is_some() {
        chunks.push(it.by_ref().take(per).collect());
    }
    let mine = chunks.remove(0);
    let (done_tx, done_rx) = channel::<io::Result<()>>();
    let others = chunks.len();
    for chunk in chunks {
        let done = done_tx.clone();
        let task: Task = Box::new(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| chunk.iter().try_for_each(f)));
            let _ = done.send(r.unwrap_or_else(|_| Err(io::Error::other("an fsync thread panicked"))));
        });
        if let Err(unsent) = POOL.lock().unwrap_or_else(|e| e.into_inner()).send(task) {
            // No thread to take it: it runs here (and reports like the others).
            (unsent.0)();
        }
    }
    drop(done_tx);
    let mut first = mine.iter().try_for_each(f);
    for _ in 0..others {
        let r = done_rx.recv().unwrap_or_else(|_| Err(io::Error::other("an fsync thread stopped")));
        if first.is_ok() {
            first = r;
        }
    }
    first
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    type Item = (usize, Arc<AtomicUsize>);

    fn batch_of(n: usize) -> (Vec<Item>, Arc<AtomicUsize>) {
        let seen = Arc::new(AtomicUsize::new(0));
        ((0..n).map(|i| (i, seen.clone())).collect(), seen)
    }

    #[test]
    fn every_item_is_synced_before_it_returns() {
        for n in [0, 1, 2, 7, 8, 9, 100] {
            let (items, seen) = batch_of(n);
            run(items, |(_, s)| {
                s.fetch_add(1, Ordering::SeqCst);
                Ok(())
            })
            .unwrap();
            assert_eq!(seen.load(Ordering::SeqCst), n, "{n} items");
        }
    }

    #[test]
    fn an_error_or_a_panic_anywhere_is_the_batch_error_and_the_rest_still_finish() {
        let (items, seen) = batch_of(40);
        let e = run(items, |(i, s)| {
            s.fetch_add(1, Ordering::SeqCst);
            if *i == 33 {
                return Err(io::Error::other("disk full"));
            }
            Ok(())
        })
        .unwrap_err();
        assert_eq!(e.to_string(), "disk full");
        // A chunk stops at its first error; every other chunk ran whole.
        assert!(seen.load(Ordering::SeqCst) >= 34);
        let (batch, _) = batch_of(40);
        let e = run(batch, |(i, _)| if *i == 39 { panic!("boom") } else { Ok(()) }).unwrap_err();
        assert!(e.to_string().contains("panicked"), "{e}");
    }
}
