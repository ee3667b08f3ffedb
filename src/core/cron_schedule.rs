//! Schedules of RMQ.SCHEDULE (not to be confused with `schedule`, the timer's queue of
//! queues by time): when a schedule fires — every N ms, or as a cron expression says in
//! an IANA zone — and its state as stored in `sched{Q}`. Cron parsing and the zone rules,
//! daylight saving included, are the `croner` and `chrono-tz` crates'; this file only
//! decides which instants count (START, END, missed times) and how a schedule is encoded.

use std::cell::RefCell;
use std::collections::HashMap;
use std::str::FromStr;

use chrono::TimeZone;
use chrono_tz::Tz;
use croner::parser::{CronParser, Seconds, Year};
use croner::Cron;

use crate::core::error::{Bound, Result, RmqError, Unit};
use crate::core::kind::{check_group, PushMode, MAX_EXACT, MIN_AT};

/// EVERY ms: up to 2^41 ms (about 70 years).
pub const EVERY: Bound = Bound::new("EVERY", 1, 1 << 41, Unit::Ms);
pub const START: Bound = Bound::new("START", MIN_AT, MAX_EXACT, Unit::UnixMs);
pub const END: Bound = Bound::new("END", MIN_AT, MAX_EXACT, Unit::UnixMs);
pub const TIMES: Bound = Bound::new("TIMES", 1, MAX_EXACT, Unit::Count);

/// A cron expression and the zone it is read in.
#[derive(Clone, Debug)]
pub struct CronTz {
    pub expr: String,
    pub zone: String,
    cron: Cron,
    tz: Tz,
}

impl PartialEq for CronTz {
    fn eq(&self, o: &CronTz) -> bool {
        self.expr == o.expr && self.zone == o.zone
    }
}

/// How a schedule's times follow each other.
#[derive(Clone, Debug, PartialEq)]
pub enum Timing {
    /// Every `ms`, counted from the previous planned time (no drift).
    Every(i64),
    Cron(Box<CronTz>),
}

/// Parsed expressions, by (expression, zone): every firing of a cron schedule decodes its
/// state, and parsing is the dearest part of that. Bounded; emptied when full.
type CronCache = HashMap<(String, String), (Cron, Tz)>;
thread_local!(static CRONS: RefCell<CronCache> = RefCell::new(HashMap::new()));
const CRON_CACHE_SIZE: usize = 1024;

/// A cron expression of 5 fields (minute hour day-of-month month day-of-week) or 6 with
/// leading seconds, read in IANA zone `zone`.
pub fn cron(expr: &str, zone: &str) -> Result<CronTz> {
    let key = (expr.to_owned(), zone.to_owned());
    if let Some((cron, tz)) = CRONS.with(|c| c.borrow().get(&key).cloned()) {
        return Ok(CronTz { expr: key.0, zone: key.1, cron, tz });
    }
    let tz =
        Tz::from_str(zone).map_err(|_| RmqError::BadSchedule(format!("unknown time zone '{zone}' (an IANA name such as Europe/Paris)")))?;
    let fields = expr.split_whitespace().count();
    if !expr.trim_start().starts_with('@') && !(5..=6).contains(&fields) {
        return Err(RmqError::BadSchedule(super::cron_diagnosis::diagnose(expr)));
    }
    let cron = CronParser::builder()
        .seconds(Seconds::Optional)
        .year(Year::Disallowed)
        .build()
        .parse(expr)
        .map_err(|_| RmqError::BadSchedule(super::cron_diagnosis::diagnose(expr)))?;
    CRONS.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() >= CRON_CACHE_SIZE {
            c.clear();
        }
        c.insert(key.clone(), (cron.clone(), tz));
    });
    Ok(CronTz { expr: key.0, zone: key.1, cron, tz })
}

impl CronTz {
    /// The first time the expression matches at or after (`inclusive`) or strictly after
    /// `t` (Unix ms; matches fall on whole seconds).
    fn next_from(&self, t: i64, inclusive: bool) -> Option<i64> {
        // Searches run on whole seconds: start from the next whole second when `t` has a
        // fraction (it can match no earlier).
        let (t, inclusive) = if t.rem_euclid(1000) != 0 { (t.div_euclid(1000) * 1000 + 1000, true) } else { (t, inclusive) };
        let at = self.tz.timestamp_millis_opt(t).single()?;
        let next = self.cron.find_next_occurrence(&at, inclusive).ok()?;
        Some(next.timestamp_millis())
    }
}

/// A schedule's definition: what SET said.
#[derive(Clone, Debug, PartialEq)]
pub struct Spec {
    pub timing: Timing,
    pub start: Option<i64>,
    pub end: Option<i64>,
    /// Firings after which the schedule deletes itself.
    pub times: Option<u64>,
    pub mode: PushMode,
    pub group: Option<Vec<u8>>,
    pub message: Vec<u8>,
    /// The SET arguments after the name, as LIST shows them.
    pub text: Vec<u8>,
}

/// A schedule's progress.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct State {
    /// The next planned time; None when none is left (END passed).
    pub next: Option<i64>,
    /// Firings so far (skipped ones included: a planned time that passed).
    pub fired: u64,
    /// The planned time of the latest firing.
    pub last: Option<i64>,
}

/// What a firing leaves of a schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum After {
    /// Goes on (next time, or none left before END).
    Goes(State),
    /// TIMES reached: the schedule deletes itself.
    Done,
}

impl Spec {
    /// What RMQ.SCHEDULE SET checks of a schedule once it is parsed, and a schedule read
    /// back from its key must pass too (a hand-written or corrupted value).
    pub fn check(&self) -> Result<()> {
        if let Timing::Every(ms) = self.timing {
            EVERY.check(ms)?;
        }
        for (bound, t) in [(&START, self.start), (&END, self.end)] {
            t.map(|t| bound.check(t)).transpose()?;
        }
        if let Some(n) = self.times {
            TIMES.check(i64::try_from(n).unwrap_or(i64::MAX))?;
        }
        if let (Some(s), Some(e)) = (self.start, self.end) {
            if s > e {
                return Err(RmqError::BadSchedule("START is after END".into()));
            }
        }
        if matches!(self.mode, PushMode::At(_)) {
            return Err(RmqError::Syntax("AT is not a schedule's mode (use RANGE, PRIORITY or DELAY)".into()));
        }
        self.mode.checked()?;
        self.group.as_deref().map(check_group).transpose()?;
        if self.message.is_empty() {
            return Err(RmqError::EmptyMessage);
        }
        Ok(())
    }

    fn within_end(&self, t: i64) -> Option<i64> {
        (t <= self.end.unwrap_or(MAX_EXACT) && t <= MAX_EXACT).then_some(t)
    }

    /// The first firing time of a schedule set at `now`: for EVERY, START (default now +
    /// ms), or if START has passed the first of START + k·ms not before now; for CRON, the
    /// first match not before max(now, START). None if it never fires (before END).
    pub fn first(&self, now: i64) -> Option<i64> {
        match &self.timing {
            Timing::Every(ms) => {
                let start = match self.start {
                    Some(s) => s,
                    None => now.checked_add(*ms)?,
                };
                let t = if start >= now { start } else { start.checked_add((now - start + ms - 1) / ms * ms)? };
                self.within_end(t)
            }
            Timing::Cron(c) => self.within_end(c.next_from(now.max(self.start.unwrap_or(now)), true)?),
        }
    }

    /// The first planned time after `planned` that is later than `now`: missed times
    /// between them are not fired again. None when none is left before END.
    pub fn after(&self, planned: i64, now: i64) -> Option<i64> {
        match &self.timing {
            Timing::Every(ms) => {
                let steps = if now >= planned { (now - planned) / ms + 1 } else { 1 };
                self.within_end(planned.checked_add(steps.checked_mul(*ms)?)?)
            }
            Timing::Cron(c) => self.within_end(c.next_from(now.max(planned), false)?),
        }
    }

    /// The push a firing at planned time `planned` makes: DELAY counts from the planned
    /// time (a late firing's message is due as it would have been).
    pub fn push_mode(&self, planned: i64) -> PushMode {
        match self.mode {
            PushMode::Delay(ms) => PushMode::At(planned.saturating_add(ms).min(MAX_EXACT)),
            m => m,
        }
    }

    /// The state after the firing of planned time `planned` at `now`.
    pub fn fire(&self, s: State, planned: i64, now: i64) -> After {
        let fired = s.fired + 1;
        if self.times.is_some_and(|n| fired >= n) {
            return After::Done;
        }
        After::Goes(State { next: self.after(planned, now), fired, last: Some(planned) })
    }
}

/// A schedule as stored: its definition and progress.
#[derive(Clone, Debug, PartialEq)]
pub struct Stored {
    pub spec: Spec,
    pub state: State,
}

const VERSION: u8 = 1;
const NONE: i64 = i64::MIN;

fn put_i64(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u64).to_le_bytes());
    out.extend_from_slice(b);
}

/// Reads a stored value field by field; any shortfall makes the whole value unreadable.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn opt(&mut self) -> Option<Option<i64>> {
        Some(Some(self.i64()?).filter(|&v| v != NONE))
    }
    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(u64::from_le_bytes(self.take(8)?.try_into().ok()?)).ok()?;
        self.take(n)
    }
    fn text(&mut self) -> Option<&'a str> {
        std::str::from_utf8(self.bytes()?).ok()
    }
}

const MODE_RANGE: u8 = 0;
const MODE_PRIORITY: u8 = 1;
const MODE_DELAY: u8 = 2;
const MODE_AT: u8 = 3;

impl Stored {
    pub fn encode(&self) -> Vec<u8> {
        let (s, st) = (&self.spec, &self.state);
        let mut out = Vec::with_capacity(64 + s.message.len() + s.text.len());
        out.push(VERSION);
        for v in [st.next, Some(st.fired as i64), st.last, s.start, s.end, s.times.map(|n| n as i64)] {
            put_i64(&mut out, v.unwrap_or(NONE));
        }
        match &s.timing {
            Timing::Every(ms) => {
                out.push(0);
                put_i64(&mut out, *ms);
            }
            Timing::Cron(c) => {
                out.push(1);
                put_bytes(&mut out, c.expr.as_bytes());
                put_bytes(&mut out, c.zone.as_bytes());
            }
        }
        let (tag, v) = match s.mode {
            PushMode::Range(v) => (MODE_RANGE, v),
            PushMode::Priority(v) => (MODE_PRIORITY, v),
            PushMode::Delay(v) => (MODE_DELAY, v),
            PushMode::At(v) => (MODE_AT, v),
        };
        out.push(tag);
        put_i64(&mut out, v);
        out.push(s.group.is_some() as u8);
        put_bytes(&mut out, s.group.as_deref().unwrap_or_default());
        put_bytes(&mut out, &s.message);
        put_bytes(&mut out, &s.text);
        out
    }

    /// The schedule stored in `b`, checked as SET checks one: an error says why a value
    /// (edited by hand, corrupted) cannot be used.
    pub fn decode(b: &[u8]) -> Result<Stored> {
        let s = Stored::read(b).ok_or_else(|| RmqError::BadSchedule("not a stored schedule this version reads".into()))??;
        s.spec.check()?;
        s.check_state()?;
        Ok(s)
    }

    /// A planned time (next, last) lies within START and END; no firing is counted past
    /// TIMES (the schedule would have deleted itself).
    fn check_state(&self) -> Result<()> {
        let (s, st) = (&self.spec, &self.state);
        let within = s.start.unwrap_or(MIN_AT)..=s.end.unwrap_or(MAX_EXACT);
        if [st.next, st.last].into_iter().flatten().any(|t| !within.contains(&t)) {
            return Err(RmqError::BadValue("planned time", "within START and END"));
        }
        if s.times.is_some_and(|n| st.fired >= n) {
            return Err(RmqError::BadSchedule("fired as many TIMES as it may".into()));
        }
        Ok(())
    }

    /// The fields of `b`; None where it is cut, too long or has an unknown tag; an error
    /// for a cron expression or zone that does not parse.
    fn read(b: &[u8]) -> Option<Result<Stored>> {
        let mut r = Reader(b);
        if r.u8()? != VERSION {
            return None;
        }
        let next = r.opt()?;
        let fired = u64::try_from(r.i64()?).ok()?;
        let (last, start, end) = (r.opt()?, r.opt()?, r.opt()?);
        let times = r.opt()?.map(u64::try_from).transpose().ok()?;
        let timing = match r.u8()? {
            0 => Timing::Every(r.i64()?),
            1 => {
                let (expr, zone) = (r.text()?, r.text()?);
                match cron(expr, zone) {
                    Ok(c) => Timing::Cron(Box::new(c)),
                    Err(e) => return Some(Err(e)),
                }
            }
            _ => return None,
        };
        let (tag, v) = (r.u8()?, r.i64()?);
        let mode = match tag {
            MODE_RANGE => PushMode::Range(v),
            MODE_PRIORITY => PushMode::Priority(v),
            MODE_DELAY => PushMode::Delay(v),
            MODE_AT => PushMode::At(v),
            _ => return None,
        };
        let has_group = r.u8()? != 0;
        let group = r.bytes()?.to_vec();
        let message = r.bytes()?.to_vec();
        let text = r.bytes()?.to_vec();
        if !r.0.is_empty() {
            return None;
        }
        let spec = Spec { timing, start, end, times, mode, group: has_group.then_some(group), message, text };
        Some(Ok(Stored { spec, state: State { next, fired, last } }))
    }
}

#[cfg(test)]
#[path = "cron_schedule_tests.rs"]
mod tests;
