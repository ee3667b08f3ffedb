//! The token bucket behind a queue's rate limit: `rate` tokens, refilled evenly over
//! `window` ms; a delivery takes one. A new bucket (after a restart, a failover or a
//! policy change, when nothing is known of recent deliveries) holds one token, so the
//! first message is not delayed and no burst exceeds the limit.

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bucket {
    tokens: f64,
    at: i64,
}

impl Bucket {
    pub fn new(now: i64, rate: i64) -> Bucket {
        Bucket { tokens: (rate as f64).min(1.0), at: now }
    }

    fn refill(&mut self, now: i64, rate: i64, window: i64) {
        if now > self.at {
            let added = (now - self.at) as f64 * rate as f64 / window as f64;
            self.tokens = (self.tokens + added).min(rate as f64);
            self.at = now;
        }
    }

    /// How many deliveries the bucket allows now.
    pub fn available(&mut self, now: i64, rate: i64, window: i64) -> u64 {
        self.refill(now, rate, window);
        self.tokens.max(0.0).floor() as u64
    }

    /// `n` deliveries were made.
    pub fn take(&mut self, n: u64) {
        self.tokens -= n as f64;
    }

    /// When the next whole token will be there (after `available` said 0).
    pub fn next_token_at(&self, rate: i64, window: i64) -> i64 {
        let missing = (1.0 - self.tokens).max(0.0);
        let mut t = self.at + (missing * window as f64 / rate as f64).ceil().max(1.0) as i64;
        // The refill over that time may round to just under a whole token: then a ms later
        // (a ms adds at least 2^-31 tokens, far more than the rounding).
        let has_token = |t| Bucket { ..*self }.available(t, rate, window) >= 1;
        while rate > 0 && !has_token(t) {
            t += 1;
        }
        t
    }

    /// Whether the bucket is as full as a new one or fuller (then forgetting it loses
    /// nothing but the burst it allows).
    pub fn is_full(&mut self, now: i64, rate: i64, window: i64) -> bool {
        self.refill(now, rate, window);
        self.tokens >= (rate as f64).min(1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refills_evenly_up_to_the_rate() {
        let mut b = Bucket::new(0, 1000);
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
        let mut b = Bucket::new(0, 2);
        assert_eq!(b.available(0, 2, 60_000), 1);
        b.take(1);
        assert_eq!(b.available(29_999, 2, 60_000), 0);
        assert_eq!(b.next_token_at(2, 60_000), 30_000);
        assert_eq!(b.available(30_000, 2, 60_000), 1);
        assert!(!b.is_full(30_000, 2, 60_000) || b.available(30_000, 2, 60_000) >= 1);
    }

    #[test]
    fn the_time_promised_for_a_token_has_one() {
        // Found by the fuzz target bucket_schedule: 8.48e-9 tokens left, then a refill over
        // the time promised rounds to 0.9999999999999999 tokens (a consumer woken for the
        // token got nothing, and was woken again a ms later).
        let (rate, window) = (2, 117_899_265);
        let mut b = Bucket::new(0, rate);
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
        let mut b = Bucket::new(100, 10);
        b.take(1);
        assert_eq!(b.available(50, 10, 1000), 0);
        assert_eq!(b.available(200, 10, 1000), 1);
    }
}
