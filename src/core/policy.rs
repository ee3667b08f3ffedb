//! A queue's settings: the server-wide ones, the queue's own (RMQ.POLICY) that override
//! them, and what the rules read from the result (`Limits`): retries, lease, length,
//! retry backoff and the rate limit.

use crate::core::error::{Bound, Unit};
use crate::core::num::parse_int;

/// The fields of RMQ.POLICY.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    Retries,
    LeaseMs,
    MaxQueueLength,
    BackoffMs,
    BackoffMaxMs,
    Rate,
    RateWindowMs,
    /// 1: POP and TPOP deliver nothing from the queue.
    Paused,
    /// Events the queue's journal keeps (`journal{Q}`, `core::journal`); 0: none.
    Journal,
}

// A field's name and inclusive bounds (shared with the settings of the same name).
pub const RETRIES: Bound = Bound::new("retries", 0, 1000, Unit::Setting);
pub const LEASE_MS: Bound = Bound::new("lease-ms", 1, 1 << 31, Unit::Setting);
pub const MAX_QUEUE_LENGTH: Bound = Bound::new("max-queue-length", 0, 1 << 62, Unit::Setting);
pub const MAX_MESSAGE_BYTES: Bound = Bound::new("max-message-bytes", 1, 536_870_912, Unit::Setting);

impl Field {
    pub const ALL: [Field; 9] = [
        Field::Retries,
        Field::LeaseMs,
        Field::MaxQueueLength,
        Field::BackoffMs,
        Field::BackoffMaxMs,
        Field::Rate,
        Field::RateWindowMs,
        Field::Paused,
        Field::Journal,
    ];

    pub fn bounds(self) -> &'static Bound {
        const BACKOFF_MS: Bound = Bound::new("backoff-ms", 0, 1 << 31, Unit::Setting);
        const BACKOFF_MAX_MS: Bound = Bound::new("backoff-max-ms", 0, 1 << 31, Unit::Setting);
        const RATE: Bound = Bound::new("rate", 0, 1_000_000_000, Unit::Setting);
        const RATE_WINDOW_MS: Bound = Bound::new("rate-window-ms", 1, 1 << 31, Unit::Setting);
        const PAUSED: Bound = Bound::new("paused", 0, 1, Unit::Setting);
        const JOURNAL: Bound = Bound::new("journal", 0, 1_000_000, Unit::Setting);
        match self {
            Field::Retries => &RETRIES,
            Field::LeaseMs => &LEASE_MS,
            Field::MaxQueueLength => &MAX_QUEUE_LENGTH,
            Field::BackoffMs => &BACKOFF_MS,
            Field::BackoffMaxMs => &BACKOFF_MAX_MS,
            Field::Rate => &RATE,
            Field::RateWindowMs => &RATE_WINDOW_MS,
            Field::Paused => &PAUSED,
            Field::Journal => &JOURNAL,
        }
    }

    pub fn name(self) -> &'static str {
        self.bounds().name
    }

    /// The field named `b` (any case).
    pub fn from_name(b: &[u8]) -> Option<Field> {
        Field::ALL.into_iter().find(|f| f.name().as_bytes().eq_ignore_ascii_case(b))
    }

    /// `v` parsed and within bounds.
    pub fn parse(self, v: &[u8]) -> Option<i64> {
        let b = self.bounds();
        parse_int(v).filter(|v| (b.min..=b.max).contains(v))
    }
}

/// A queue's own settings: the fields it sets (the rest come from the server). A mask of
/// the fields set beside their values (0 where unset), not an `Option` each: every
/// command moves its queue's header, the policy in it, and at 9 `Option<i64>` (144 bytes)
/// each move became a `memcpy` call (~1% of a PUSH or ACK).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Policy {
    set: u16,
    values: [i64; Field::ALL.len()],
}

// The mask has a bit per field.
const _: () = assert!(Field::ALL.len() <= u16::BITS as usize);

impl Policy {
    pub fn get(&self, f: Field) -> Option<i64> {
        (self.set & (1 << f as u16) != 0).then(|| self.values[f as usize])
    }

    pub fn set(&mut self, f: Field, v: i64) {
        self.set |= 1 << f as u16;
        self.values[f as usize] = v;
    }

    /// `name=value` pairs joined by commas, in field order.
    pub fn encode(&self) -> String {
        Field::ALL.iter().filter_map(|&f| self.get(f).map(|v| format!("{}={v}", f.name()))).collect::<Vec<_>>().join(",")
    }

    /// The inverse of `encode`; pairs that do not parse are ignored (a policy edited by
    /// hand cannot make the queue unusable).
    pub fn decode(b: &[u8]) -> Policy {
        let mut p = Policy::default();
        for pair in b.split(|&c| c == b',') {
            let mut kv = pair.splitn(2, |&c| c == b'=');
            if let (Some(Some(f)), Some(v)) = (kv.next().map(Field::from_name), kv.next()) {
                if let Some(v) = f.parse(v) {
                    p.set(f, v);
                }
            }
        }
        p
    }
}

/// The effective settings of one queue, read by the rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub retries: u32,
    pub lease_ms: i64,
    pub max_message_bytes: i64,
    pub max_queue_length: i64,
    pub backoff_ms: i64,
    pub backoff_max_ms: i64,
    /// Deliveries per `rate_window_ms`; 0 = unlimited.
    pub rate: i64,
    pub rate_window_ms: i64,
    /// POP and TPOP deliver nothing.
    pub paused: bool,
    /// Events kept in the journal; 0: none.
    pub journal: i64,
}

impl Limits {
    /// The server-wide settings with the policy-only fields at their defaults.
    pub fn server(retries: i64, lease_ms: i64, max_message_bytes: i64, max_queue_length: i64) -> Limits {
        Limits {
            retries: retries.clamp(0, u32::MAX as i64) as u32,
            lease_ms,
            max_message_bytes,
            max_queue_length,
            backoff_ms: 0,
            backoff_max_ms: 3_600_000,
            rate: 0,
            rate_window_ms: 1000,
            paused: false,
            journal: 0,
        }
    }

    /// These settings overridden by a queue's policy.
    pub fn with(mut self, p: &Policy) -> Limits {
        // Only the fields set, by their bits: most queues set none, and every PUSH and POP
        // reads its limits (a look at each of the 9 fields cost ~40 instructions a call).
        let mut set = p.set;
        while let Some(&f) = Field::ALL.get(set.trailing_zeros() as usize) {
            set &= set - 1;
            let v = p.values[f as usize];
            match f {
                Field::Retries => self.retries = v as u32,
                Field::LeaseMs => self.lease_ms = v,
                Field::MaxQueueLength => self.max_queue_length = v,
                Field::BackoffMs => self.backoff_ms = v,
                Field::BackoffMaxMs => self.backoff_max_ms = v,
                Field::Rate => self.rate = v,
                Field::RateWindowMs => self.rate_window_ms = v,
                Field::Paused => self.paused = v == 1,
                Field::Journal => self.journal = v,
            }
        }
        self
    }

    /// The value of field `f` (RMQ.POLICY GET).
    pub fn get(&self, f: Field) -> i64 {
        match f {
            Field::Retries => self.retries as i64,
            Field::LeaseMs => self.lease_ms,
            Field::MaxQueueLength => self.max_queue_length,
            Field::BackoffMs => self.backoff_ms,
            Field::BackoffMaxMs => self.backoff_max_ms,
            Field::Rate => self.rate,
            Field::RateWindowMs => self.rate_window_ms,
            Field::Paused => self.paused as i64,
            Field::Journal => self.journal,
        }
    }

    /// The delay after the `failed`-th failed delivery (1 for the first):
    /// min(backoff-max-ms, backoff-ms × 2^(failed-1)).
    pub fn backoff(&self, failed: u32) -> i64 {
        if self.backoff_ms == 0 {
            return 0;
        }
        let doublings = failed.saturating_sub(1).min(62);
        self.backoff_ms.saturating_mul(1i64 << doublings).min(self.backoff_max_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_parse_within_bounds() {
        assert_eq!(Field::from_name(b"BACKOFF-MS"), Some(Field::BackoffMs));
        assert_eq!(Field::from_name(b"speed"), None);
        assert_eq!(Field::Rate.parse(b"1000000000"), Some(1_000_000_000));
        assert_eq!(Field::Rate.parse(b"1000000001"), None);
        assert_eq!(Field::RateWindowMs.parse(b"0"), None);
        assert_eq!(Field::LeaseMs.parse(b"2147483648"), Some(1 << 31));
        assert_eq!(Field::BackoffMaxMs.parse(b"-1"), None);
        assert_eq!(Field::Retries.parse(b"1.5"), None);
        assert_eq!(Field::Paused.parse(b"1"), Some(1));
        assert_eq!(Field::Paused.parse(b"2"), None);
        assert_eq!(Field::Journal.parse(b"1000000"), Some(1_000_000));
        assert_eq!((Field::Journal.parse(b"1000001"), Field::Journal.parse(b"-1")), (None, None));
    }

    #[test]
    fn encoding_round_trips_and_tolerates_junk() {
        let mut p = Policy::default();
        assert_eq!(Policy::decode(p.encode().as_bytes()), p);
        p.set(Field::Rate, 5);
        p.set(Field::Retries, 0);
        assert_eq!(p.encode(), "retries=0,rate=5");
        assert_eq!(Policy::decode(p.encode().as_bytes()), p);
        assert_eq!(Policy::decode(b"rate=x,junk,retries=3,lease-ms=0"), {
            let mut q = Policy::default();
            q.set(Field::Retries, 3);
            q
        });
    }

    #[test]
    fn policy_overrides_server_settings() {
        let server = Limits::server(16, 30_000, 1 << 20, 0);
        assert_eq!(server.with(&Policy::default()), server);
        let mut p = Policy::default();
        p.set(Field::Retries, 2);
        p.set(Field::RateWindowMs, 10);
        let l = server.with(&p);
        assert_eq!((l.retries, l.lease_ms, l.rate_window_ms, l.backoff_max_ms), (2, 30_000, 10, 3_600_000));
        for f in Field::ALL {
            assert_eq!(l.get(f), p.get(f).unwrap_or(server.get(f)), "{f:?}");
        }
    }

    #[test]
    fn backoff_doubles_up_to_its_cap() {
        let mut l = Limits::server(16, 1, 1, 0);
        assert_eq!(l.backoff(1), 0, "no backoff by default");
        l.backoff_ms = 100;
        l.backoff_max_ms = 1000;
        assert_eq!([1, 2, 3, 4, 5].map(|d| l.backoff(d)), [100, 200, 400, 800, 1000]);
        assert_eq!(l.backoff(0), 100);
        l.backoff_max_ms = 1 << 31;
        l.backoff_ms = 1 << 31;
        assert_eq!(l.backoff(1000), 1 << 31, "no overflow");
    }
}
