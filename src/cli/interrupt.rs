//! What Ctrl-C says while a run is followed on a terminal: the follow stops (exit 130, as any
//! interrupted command), but the run does not — so the person is told where it stands and the
//! commands that take it up again (`od run watch`, `od ui respond`, `od run cancel`), instead of a
//! silent exit that reads as "the run is gone".
//!
//! The note is kept where a signal handler can read it without locking or allocating: a leaked,
//! immutable message behind an atomic pointer, replaced (never freed) as the follow moves on — a
//! handful of short strings per command.

use std::sync::atomic::{AtomicPtr, Ordering};

/// The note the handler prints: a leaked `&'static [u8]`, or null.
static NOTE: AtomicPtr<&'static [u8]> = AtomicPtr::new(std::ptr::null_mut());

/// Sets what Ctrl-C says from now on.
pub fn note(text: String) {
    let leaked: &'static [u8] = Box::leak(format!("\n{text}\n").into_bytes().into_boxed_slice());
    NOTE.store(Box::into_raw(Box::new(leaked)), Ordering::SeqCst);
}

/// Prints the note (after showing the cursor a prompt may have hidden) and exits 130. Only
/// async-signal-safe calls: an atomic load, `write` and `_exit`.
extern "C" fn on_interrupt(_: libc::c_int) {
    const SHOW_CURSOR: &[u8] = b"\x1b[?25h";
    // SAFETY: `write` and `_exit` are async-signal-safe; the note is immutable and never freed.
    unsafe {
        libc::write(libc::STDERR_FILENO, SHOW_CURSOR.as_ptr().cast(), SHOW_CURSOR.len());
        let p = NOTE.load(Ordering::SeqCst);
        if !p.is_null() {
            let text: &[u8] = *p;
            libc::write(libc::STDERR_FILENO, text.as_ptr().cast(), text.len());
        }
        libc::_exit(130);
    }
}

/// Installs the handler (once per process is enough; installing again is harmless).
pub fn install() {
    // SAFETY: the handler only makes async-signal-safe calls (above).
    unsafe {
        libc::signal(libc::SIGINT, on_interrupt as *const () as libc::sighandler_t);
    }
}

/// The note while a run is followed and nothing is asked.
pub fn following(run_id: &str) {
    note(format!(
        "Stopped following run {run_id}; the run goes on. `od run watch {run_id}` follows it again; \
         `od run cancel {run_id}` stops it."
    ));
}

/// The note while the person is asked to answer `surface_id`.
pub fn asking(run_id: &str, surface_id: &str) {
    note(format!(
        "Stopped following run {run_id}; it still waits for an answer to {surface_id}. \
         `od run watch {run_id}` asks again here; `od ui respond {surface_id} --run {run_id} --value …` \
         answers it from anywhere; `od run cancel {run_id}` stops it."
    ));
}
