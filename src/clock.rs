//! Injected time. Code that needs "now" — or needs to wait until a moment — takes a [`Clock`], so
//! tests drive time by hand and never sleep for real: waiting on a [`ManualClock`] ends when the
//! test advances it past the deadline.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

/// A future that completes at a deadline.
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// A source of wall-clock time in unix milliseconds.
pub trait Clock: Send + Sync + 'static {
    /// Milliseconds since the unix epoch.
    fn now_ms(&self) -> i64;
    /// Completes once `now_ms() >= deadline_ms`.
    fn sleep_until(&self, deadline_ms: i64) -> Sleep;
}

/// The real system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
    }

    fn sleep_until(&self, deadline_ms: i64) -> Sleep {
        let wait = (deadline_ms - self.now_ms()).max(0) as u64;
        Box::pin(tokio::time::sleep(std::time::Duration::from_millis(wait)))
    }
}

#[derive(Debug, Default)]
struct Manual {
    ms: AtomicI64,
    moved: tokio::sync::Notify,
}

/// A clock tests set and advance by hand.
#[derive(Debug, Default, Clone)]
pub struct ManualClock(Arc<Manual>);

impl ManualClock {
    /// A clock showing `ms`.
    pub fn at(ms: i64) -> Self {
        Self(Arc::new(Manual { ms: AtomicI64::new(ms), moved: tokio::sync::Notify::new() }))
    }
    /// Moves the clock forward by `ms`, waking whoever waits on it.
    pub fn advance(&self, ms: i64) {
        self.0.ms.fetch_add(ms, Ordering::SeqCst);
        self.0.moved.notify_waiters();
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.0.ms.load(Ordering::SeqCst)
    }

    fn sleep_until(&self, deadline_ms: i64) -> Sleep {
        let inner = self.0.clone();
        Box::pin(async move {
            loop {
                let moved = inner.moved.notified();
                tokio::pin!(moved);
                moved.as_mut().enable();
                if inner.ms.load(Ordering::SeqCst) >= deadline_ms {
                    return;
                }
                moved.await;
            }
        })
    }
}

/// Shared handle to a clock.
pub type SharedClock = Arc<dyn Clock>;

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_manual_sleep_ends_when_the_clock_is_advanced_past_it() {
        let c = ManualClock::at(1_000);
        let mut sleep = c.sleep_until(1_500);
        let pending = |s: &mut Sleep| {
            let waker = std::task::Waker::noop();
            s.as_mut().poll(&mut std::task::Context::from_waker(waker)).is_pending()
        };
        assert!(pending(&mut sleep));
        c.advance(400);
        assert!(pending(&mut sleep));
        c.advance(100);
        sleep.await;
        assert_eq!(c.now_ms(), 1_500);
    }
}
