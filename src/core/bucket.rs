//! The token bucket behind a queue's rate limit: `rate` tokens, refilled evenly over
//! `window` ms; a delivery takes one. A new bucket (after a restart, a failover or a
//! policy change, when nothing is known of recent deliveries) holds one token, so the
//! first message is not delayed and no burst exceeds the limit.
//!
//! Counted in whole units of 1/window token, so a token is there exactly when the
//! refill reaches it, however often the bucket was looked at before: a float sum of
//! refills drifts (0.3 + 0.6 + 0.1 tokens is 0.9999999999999999), and a token due at the
//! end of a window came a ms late (found by `make soak`).

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bucket {
    /// Tokens × `window`.
    credit: i128,
    /// The window (ms) the credit is counted in: the one last asked with.
    window: i64,
    at: i64,
}

impl Bucket {
    pub fn new(now: i64, rate: i64, window: i64) -> Bucket {
        let window = window.max(1);
        Bucket { credit: rate.clamp(0, 1) as i128 * window as i128, window, at: now }
    }

    /// Counts the credit in `window` instead (the setting changed).
    fn rescale(&mut self, window: i64) {
        let window = window.max(1);
        if window != self.window {
            self.credit = self.credit * window as i128 / self.window as i128;
            self.window = window;
        }
    }

    fn refill(&mut self, now: i64, rate: i64, window: i64) {
        self.rescale(window);
        if now > self.at {
            let (w, rate) = (self.window as i128, rate.max(0) as i128);
            // A whole window refills the bucket: longer adds nothing (and cannot overflow).
            let elapsed = now.saturating_sub(self.at).min(self.window) as i128;
            self.credit = (self.credit + elapsed * rate).min(rate * w);
            self.at = now;
        }
    }

    /// How many deliveries the bucket allows now.
    pub fn available(&mut self, now: i64, rate: i64, window: i64) -> u64 {
        self.refill(now, rate, window);
        (self.credit.max(0) / self.window as i128) as u64
    }

    /// `n` deliveries were made.
    pub fn take(&mut self, n: u64) {
        self.credit -= n as i128 * self.window as i128;
    }

    /// When the next whole token will be there (after `available` said 0).
    pub fn next_token_at(&self, rate: i64, window: i64) -> i64 {
        let mut b = *self;
        b.rescale(window);
        let rate = rate.max(1) as i128;
        let missing = (b.window as i128 - b.credit).max(0);
        let wait = ((missing + rate - 1) / rate).max(1);
        b.at.saturating_add(wait.min(i64::MAX as i128) as i64)
    }

    /// Whether the bucket is as full as a new one or fuller (then forgetting it loses
    /// nothing but the burst it allows).
    pub fn is_full(&mut self, now: i64, rate: i64, window: i64) -> bool {
        self.refill(now, rate, window);
        self.credit >= rate.clamp(0, 1) as i128 * self.window as i128
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refills_evenly_up_to_the_rate() {
        let mut b = Bucket::new(0, 1000, 1000);
        assert_eq!(b.available(0, 1000, 1000), 1, "a new bucket holds one token");
        b.take(1);
        assert_eq!(b.available(0, 1000, 1000), 0);
        assert_eq!(b.next_token_at(1000, 1000), 1);
        assert_eq!(b.available(1, 1000, 1000), 1, "one per ms at 1000/s");
        assert_eq!(b.available(10, 1000, 1000), 10);
        assert_eq!(b.available(5000, 1000, 1000), 1000, "capped at the rate");
        b.take(1000);
        assert_eq!(b.available(5000, 1000, 1000), 0);
    }

    #[test]
    fn slow_rates_wait_for_a_whole_token() {
        let mut b = Bucket::new(0, 2, 60_000);
        assert_eq!(b.available(0, 2, 60_000), 1);
        b.take(1);
        assert_eq!(b.available(29_999, 2, 60_000), 0);
        assert!(!b.is_full(29_999, 2, 60_000), "short of a whole token: not as full as a new bucket");
        assert_eq!(b.next_token_at(2, 60_000), 30_000);
        assert_eq!(b.available(30_000, 2, 60_000), 1);
        assert!(b.is_full(30_000, 2, 60_000), "a whole token: as full as a new bucket");
    }

    #[test]
    fn the_time_promised_for_a_token_has_one() {
        // Found by the fuzz target bucket_schedule: 8.48e-9 tokens left, then a refill over
        // the time promised rounds to 0.9999999999999999 tokens (a consumer woken for the
        // token got nothing, and was woken again a ms later).
        let (rate, window) = (2, 117_899_265);
        let mut b = Bucket::new(0, rate, window);
        b.take(1);
        for round in 0..2 {
            assert_eq!(b.available(b.at, rate, window), 0);
            let t = b.next_token_at(rate, window);
            assert!(t > b.at);
            assert_eq!(b.available(t, rate, window), 1, "round {round}: {b:?}");
            b.take(1);
        }
    }

    #[test]
    fn time_going_backwards_adds_nothing() {
        let mut b = Bucket::new(100, 10, 1000);
        b.take(1);
        assert_eq!(b.available(50, 10, 1000), 0);
        assert_eq!(b.available(200, 10, 1000), 1);
    }

    #[test]
    fn a_token_comes_when_due_however_often_it_is_looked_at() {
        // Found by `make soak`: rate 1 a second, looked at 300, 900 and 1000 ms after the
        // last delivery: the float refills summed to 0.9999999999999999, no token.
        let mut b = Bucket::new(0, 1, 1000);
        b.take(1);
        for t in [300, 900] {
            assert_eq!(b.available(t, 1, 1000), 0);
        }
        assert_eq!(b.available(1000, 1, 1000), 1);
        // Every rate and window, looked at every `step` ms: no token before the refill
        // reaches one, one at that ms, and the time promised is that ms.
        for (rate, window) in [(1, 1000), (3, 1000), (7, 10), (2, 60_000), (1000, 1000), (3, 7)] {
            let due = (window + rate - 1) / rate;
            for step in [1, 3, 7, 10, 100, 300, 999] {
                let mut b = Bucket::new(0, rate, window);
                b.take(1);
                assert_eq!(b.next_token_at(rate, window), due, "rate {rate}/{window}");
                let mut t = 0;
                while t + step < due {
                    t += step;
                    assert_eq!(b.available(t, rate, window), 0, "rate {rate}/{window} step {step} at {t}");
                }
                assert_eq!(b.available(due, rate, window), 1, "rate {rate}/{window} step {step}");
            }
        }
    }

    #[test]
    fn a_changed_window_keeps_whole_tokens() {
        let mut b = Bucket::new(0, 10, 1000);
        assert_eq!(b.available(0, 10, 1000), 1);
        assert_eq!(b.available(0, 10, 60_000), 1, "the token held stays");
        b.take(1);
        assert_eq!(b.next_token_at(10, 60_000), 6_000);
        assert_eq!(b.available(5_999, 10, 60_000), 0);
        assert_eq!(b.available(6_000, 10, 60_000), 1);
    }

    #[test]
    fn long_idle_times_fill_without_overflow() {
        let mut b = Bucket::new(i64::MIN / 2, 1_000_000_000, i64::MAX);
        b.take(1);
        assert_eq!(b.available(i64::MAX / 2, 1_000_000_000, i64::MAX), 1_000_000_000);
        assert!(b.is_full(i64::MAX / 2, 1_000_000_000, i64::MAX));
    }
}
