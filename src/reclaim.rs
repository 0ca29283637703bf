//! Releasing what sled retired on this thread. sled 0.34.7 hands retired structures — among them
//! each filled 512 KiB log buffer (`IoBuf`) — to crossbeam-epoch's deferred destruction, which
//! queues them in the retiring thread's local bag and frees them only once that bag is flushed
//! (when 64 more deferrals pile up on the same thread, or the thread exits). A daemon whose threads
//! write to sled only now and then keeps those buffers indefinitely: memory that grew with every
//! burst of runs. [`flush_deferred`] is called where a thread finishes a unit of work that may
//! have written to sled.

/// Moves this thread's deferred destructions to the global queue and frees whatever is safe.
pub fn flush_deferred() {
    crossbeam_epoch::pin().flush();
}
