//! Releasing what sled retired on this thread. sled 0.34.7 hands retired structures — among them
//! each filled 512 KiB log buffer (`IoBuf`) — to crossbeam-epoch's deferred destruction, which
//! queues them in the retiring thread's local bag and frees them only once that bag is flushed
//! (when 64 more deferrals pile up on the same thread, or the thread exits). A daemon whose threads
//! write to sled only now and then keeps those buffers indefinitely: memory that grew with every
//! burst of runs. [`flush_deferred`] is called where a thread finishes a unit of work that may
//! have written to sled. [`release_free_memory`] hands the allocator's free pages back to the
//! system once the log has gone idle (after a burst, freed memory otherwise stays resident).

/// Moves this thread's deferred destructions to the global queue and frees whatever is safe.
pub fn flush_deferred() {
    crossbeam_epoch::pin().flush();
}

/// Returns the free pages of every malloc arena to the system (glibc's `malloc_trim`); called when
/// the log has gone idle, so a burst's transient allocations do not stay resident after it.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases memory the allocator holds free; any thread may call it.
    unsafe {
        libc::malloc_trim(0);
    }
}
