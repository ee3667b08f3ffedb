//! A bounded pool of dedicated connections (one Redis user's long polls and durable
//! writes): at most `cap` open at once, idle ones reused newest first and closed once idle
//! for a while, so a burst leaves nothing behind. Past the cap a caller waits its turn for
//! as long as it says, then goes without. Generic over the connection, so its rules are
//! tested without a server.
//!
//! Kept here rather than through bb8/deadpool: a connection taken out must be returned
//! only after a command completed on it (a cancelled blocking POP would still hold the
//! server-side wait, and its reply would reach the next user), so the pool needs an
//! explicit give-back with close-on-drop, which those pools' recycle checks cannot tell.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

pub struct Pool<T> {
    cap: usize,
    /// One permit per connection open (idle or in use).
    open: Arc<Semaphore>,
    idle: Mutex<Vec<(T, Instant, OwnedSemaphorePermit)>>,
    /// Woken when a connection is given back or closed.
    freed: Notify,
}

/// A connection taken from the pool: `give_back` after a completed command; dropped
/// otherwise, it is closed.
pub struct Lease<'a, T> {
    pool: &'a Pool<T>,
    conn: Option<T>,
    permit: Option<OwnedSemaphorePermit>,
}

impl<T> Pool<T> {
    pub fn new(cap: usize) -> Pool<T> {
        Pool { cap, open: Arc::new(Semaphore::new(cap)), idle: Mutex::new(Vec::new()), freed: Notify::new() }
    }

    /// An idle connection, or a new one from `open` while fewer than the cap are open, or
    /// (waiting at most `wait` for one to be freed) `None`.
    pub async fn take<F, Fut, E>(&self, wait: Duration, mut open: F) -> Result<Option<Lease<'_, T>>, E>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            // Registered before looking, so that a give-back in between is not missed.
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            if let Some((conn, _, permit)) = self.idle.lock().ok().and_then(|mut v| v.pop()) {
                return Ok(Some(Lease { pool: self, conn: Some(conn), permit: Some(permit) }));
            }
            if let Ok(permit) = self.open.clone().try_acquire_owned() {
                return match open().await {
                    Ok(conn) => Ok(Some(Lease { pool: self, conn: Some(conn), permit: Some(permit) })),
                    Err(e) => {
                        drop(permit);
                        self.freed.notify_one();
                        Err(e)
                    }
                };
            }
            if tokio::time::timeout_at(deadline, freed).await.is_err() {
                return Ok(None);
            }
        }
    }

    /// Closes the connections idle for longer than `idle_for`; how many.
    pub fn close_idle(&self, idle_for: Duration) -> usize {
        let Ok(mut v) = self.idle.lock() else { return 0 };
        let before = v.len();
        v.retain(|(_, since, _)| since.elapsed() < idle_for);
        let closed = before - v.len();
        drop(v);
        for _ in 0..closed {
            self.freed.notify_one();
        }
        closed
    }

    /// Connections open now (idle or in use).
    pub fn open(&self) -> usize {
        self.cap - self.open.available_permits()
    }
}

impl<T> Lease<'_, T> {
    pub fn conn(&mut self) -> &mut T {
        // Some until give_back or drop, which consume the lease.
        self.conn.as_mut().unwrap_or_else(|| unreachable!())
    }

    /// Back to the pool, for the next caller.
    pub fn give_back(mut self) {
        if let (Some(conn), Some(permit)) = (self.conn.take(), self.permit.take()) {
            if let Ok(mut v) = self.pool.idle.lock() {
                v.push((conn, Instant::now(), permit));
            }
            self.pool.freed.notify_one();
        }
    }
}

impl<T> Drop for Lease<'_, T> {
    fn drop(&mut self) {
        // Closed: the connection first, then its slot, then a waiter told.
        if let Some(permit) = self.permit.take() {
            drop(self.conn.take());
            drop(permit);
            self.pool.freed.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn opener(n: &AtomicUsize) -> impl FnMut() -> std::future::Ready<Result<usize, ()>> + '_ {
        move || std::future::ready(Ok(n.fetch_add(1, Ordering::SeqCst)))
    }

    #[tokio::test]
    async fn reuses_idle_and_caps_open() {
        let pool = Pool::new(2);
        let n = AtomicUsize::new(0);
        let a = pool.take(Duration::ZERO, opener(&n)).await.unwrap().unwrap();
        let b = pool.take(Duration::ZERO, opener(&n)).await.unwrap().unwrap();
        assert_eq!(pool.open(), 2);
        // At the cap: none within the wait.
        assert!(pool.take(Duration::from_millis(20), opener(&n)).await.unwrap().is_none());
        a.give_back();
        let mut c = pool.take(Duration::ZERO, opener(&n)).await.unwrap().unwrap();
        assert_eq!(*c.conn(), 0, "the idle connection, not a new one");
        // Dropped without give_back: closed, its slot free for a new one.
        drop(b);
        assert_eq!(pool.open(), 1);
        let mut d = pool.take(Duration::ZERO, opener(&n)).await.unwrap().unwrap();
        assert_eq!(*d.conn(), 2);
        assert_eq!(n.load(Ordering::SeqCst), 3);
    }

    /// The connection a second taker, waiting on a full pool of one, gets once `end` has
    /// ended the first lease (the first connection is 0, a new one the waiter opens 10).
    async fn waiter_gets_after(end: impl FnOnce(Lease<'_, usize>)) -> usize {
        let pool = Arc::new(Pool::new(1));
        let n = AtomicUsize::new(0);
        let a = pool.take(Duration::ZERO, opener(&n)).await.unwrap().unwrap();
        let p2 = pool.clone();
        let waiter = tokio::spawn(async move {
            let n = AtomicUsize::new(10);
            let mut l = p2.take(Duration::from_secs(30), opener(&n)).await.unwrap().unwrap();
            *l.conn()
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        end(a);
        waiter.await.unwrap()
    }

    #[tokio::test]
    async fn a_waiter_gets_the_connection_given_back() {
        assert_eq!(waiter_gets_after(|a: Lease<'_, usize>| a.give_back()).await, 0);
    }

    #[tokio::test]
    async fn a_waiter_gets_a_slot_closed() {
        assert_eq!(waiter_gets_after(|a: Lease<'_, usize>| drop(a)).await, 10, "a new connection in the freed slot");
    }

    #[tokio::test]
    async fn idle_ones_close() {
        let pool = Pool::new(3);
        let n = AtomicUsize::new(0);
        let a = pool.take(Duration::ZERO, opener(&n)).await.unwrap().unwrap();
        let b = pool.take(Duration::ZERO, opener(&n)).await.unwrap().unwrap();
        a.give_back();
        b.give_back();
        assert_eq!(pool.close_idle(Duration::from_secs(60)), 0);
        assert_eq!(pool.open(), 2);
        tokio::time::sleep(Duration::from_millis(30)).await;
        assert_eq!(pool.close_idle(Duration::from_millis(10)), 2);
        assert_eq!(pool.open(), 0);
    }

    #[tokio::test]
    async fn a_failed_open_frees_its_slot() {
        let pool: Pool<usize> = Pool::new(1);
        let r = pool.take(Duration::ZERO, || std::future::ready(Err::<usize, &str>("refused"))).await;
        assert!(matches!(r, Err("refused")));
        assert_eq!(pool.open(), 0);
    }
}
