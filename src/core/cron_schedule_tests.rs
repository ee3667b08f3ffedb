//! Firing times of schedules, with fixed instants (never the wall clock), daylight saving
//! in America/New_York included (2025: clocks go 02:00 → 03:00 on March 9, and 02:00 →
//! 01:00 on November 2).

use super::*;

/// 2025-01-01T00:00:00Z.
const NEW_YEAR: i64 = 1_735_689_600_000;
const SEC: i64 = 1000;
const MIN: i64 = 60 * SEC;
const HOUR: i64 = 60 * MIN;
const DAY: i64 = 24 * HOUR;

fn spec(timing: Timing) -> Spec {
    Spec { timing, start: None, end: None, times: None, mode: PushMode::Range(1), group: None, message: b"m".to_vec(), text: b"x".to_vec() }
}

fn cron_spec(expr: &str, zone: &str) -> Spec {
    spec(Timing::Cron(Box::new(cron(expr, zone).expect("a valid expression"))))
}

/// The first `n` planned times from `now`, each fired on time.
fn times(s: &Spec, now: i64, n: usize) -> Vec<i64> {
    let mut out = vec![s.first(now).expect("fires")];
    while out.len() < n {
        let t = *out.last().unwrap_or(&now);
        out.push(s.after(t, t).expect("fires again"));
    }
    out
}

#[test]
fn every_counts_from_start_without_drift() {
    let s = spec(Timing::Every(250));
    assert_eq!(times(&s, NEW_YEAR + 7, 3), [NEW_YEAR + 257, NEW_YEAR + 507, NEW_YEAR + 757]);
    // Fired late: the next time is the first planned one after now, not now + ms.
    assert_eq!(s.after(NEW_YEAR, NEW_YEAR + 10), Some(NEW_YEAR + 250));
    assert_eq!(s.after(NEW_YEAR, NEW_YEAR + 1000), Some(NEW_YEAR + 1250), "missed times are passed over");
    let mut s = s;
    s.start = Some(NEW_YEAR + 5000);
    assert_eq!(s.first(NEW_YEAR), Some(NEW_YEAR + 5000));
    s.start = Some(NEW_YEAR - 1000);
    assert_eq!(s.first(NEW_YEAR + 1), Some(NEW_YEAR + 250), "a past START goes on from its next time");
    assert_eq!(s.first(NEW_YEAR), Some(NEW_YEAR), "a planned time equal to now is now");
}

#[test]
fn end_and_times_bound_the_firings() {
    let mut s = spec(Timing::Every(100));
    s.end = Some(NEW_YEAR + 250);
    assert_eq!(s.first(NEW_YEAR), Some(NEW_YEAR + 100));
    assert_eq!(s.after(NEW_YEAR + 200, NEW_YEAR + 200), None, "300 is past END");
    assert_eq!(s.first(NEW_YEAR + 200), None, "never fires before END");
    s.end = None;
    s.times = Some(2);
    let st = State { next: Some(NEW_YEAR + 100), fired: 0, last: None };
    let After::Goes(st) = s.fire(st, NEW_YEAR + 100, NEW_YEAR + 101) else { panic!("goes on") };
    assert_eq!(st, State { next: Some(NEW_YEAR + 200), fired: 1, last: Some(NEW_YEAR + 100) });
    assert_eq!(s.fire(st, NEW_YEAR + 200, NEW_YEAR + 200), After::Done);
    let huge = spec(Timing::Every(EVERY.max));
    assert_eq!(huge.after(MAX_EXACT - 5, MAX_EXACT - 5), None, "past 2^53 nothing is left");
}

#[test]
fn cron_with_and_without_seconds() {
    let s = cron_spec("* * * * * *", "UTC");
    assert_eq!(times(&s, NEW_YEAR + 500, 3), [NEW_YEAR + SEC, NEW_YEAR + 2 * SEC, NEW_YEAR + 3 * SEC]);
    assert_eq!(s.first(NEW_YEAR), Some(NEW_YEAR), "a whole second that matches is now");
    assert_eq!(s.after(NEW_YEAR, NEW_YEAR + 2500), Some(NEW_YEAR + 3 * SEC));
    let s = cron_spec("*/15 * * * *", "UTC");
    assert_eq!(times(&s, NEW_YEAR + 1, 2), [NEW_YEAR + 15 * MIN, NEW_YEAR + 30 * MIN]);
    // 2025-01-01 is a Wednesday: the next Sunday (0 or 7 or SUN) is January 5.
    for dow in ["0", "7", "SUN", "sun"] {
        assert_eq!(cron_spec(&format!("0 9 * * {dow}"), "UTC").first(NEW_YEAR), Some(NEW_YEAR + 4 * DAY + 9 * HOUR), "{dow}");
    }
    let s = cron_spec("0 8-10/2 * JAN,MAR MON-FRI", "UTC");
    assert_eq!(times(&s, NEW_YEAR, 3), [NEW_YEAR + 8 * HOUR, NEW_YEAR + 10 * HOUR, NEW_YEAR + DAY + 8 * HOUR]);
    let mut s = cron_spec("0 0 * * *", "UTC");
    s.start = Some(NEW_YEAR + 3 * DAY + 1);
    assert_eq!(s.first(NEW_YEAR), Some(NEW_YEAR + 4 * DAY), "not before START");
}

#[test]
fn cron_in_a_zone() {
    // Europe/Paris is UTC+1 in January: 09:00 there is 08:00 UTC.
    assert_eq!(cron_spec("0 9 * * *", "Europe/Paris").first(NEW_YEAR), Some(NEW_YEAR + 8 * HOUR));
}

#[test]
fn daylight_saving_gap_runs_a_fixed_time_right_after_it() {
    // 02:30 does not exist on 2025-03-09 in New York: croner runs it at 03:00 EDT.
    let s = cron_spec("30 2 * * *", "America/New_York");
    let mar8_0230 = 1_741_419_000_000;
    assert_eq!(times(&s, mar8_0230 - 1, 3), [mar8_0230, 1_741_503_600_000, 1_741_588_200_000]);
    // An interval job skips the missing hour: from 01:45 EST the next is 03:00 EDT.
    let s = cron_spec("*/15 * * * *", "America/New_York");
    let mar9_0145_est = 1_741_502_700_000;
    assert_eq!(s.after(mar9_0145_est, mar9_0145_est), Some(mar9_0145_est + 15 * MIN));
    assert_eq!(1_741_503_600_000 - mar9_0145_est, 15 * MIN, "03:00 EDT is 15 real minutes after 01:45 EST");
}

#[test]
fn daylight_saving_repeat_runs_a_fixed_time_once() {
    // 01:30 happens twice on 2025-11-02 in New York: once (EDT), then on November 3.
    let s = cron_spec("30 1 * * *", "America/New_York");
    let (edt, est, next_day) = (1_762_061_400_000, 1_762_065_000_000, 1_762_151_400_000);
    assert_eq!(times(&s, edt - 1, 2), [edt, next_day]);
    assert_ne!(s.after(edt, edt), Some(est));
    // An interval job runs in both passes of the repeated hour.
    let s = cron_spec("*/30 * * * *", "America/New_York");
    let at_0045 = 1_762_058_700_000;
    let expect = [1_762_059_600_000, 1_762_061_400_000, 1_762_063_200_000, 1_762_065_000_000, 1_762_066_800_000];
    assert_eq!(times(&s, at_0045 + 1, 5), expect);
}

#[test]
fn bad_expressions_and_zones_are_refused() {
    for (expr, zone, word) in [
        ("* * * *", "UTC", "5 fields"),
        ("* * * * * * *", "UTC", "5 fields"),
        ("61 * * * *", "UTC", "cron expression"),
        ("* * * * MOO", "UTC", "cron expression"),
        ("* * * * *", "Mars/Olympus", "time zone"),
        ("", "UTC", "5 fields"),
    ] {
        match cron(expr, zone) {
            Err(RmqError::BadSchedule(m)) => assert!(m.contains(word), "{expr}: {m}"),
            other => panic!("{expr} {zone}: {other:?}"),
        }
    }
    // February 30 parses but never comes.
    assert_eq!(cron_spec("0 0 30 2 *", "UTC").first(NEW_YEAR), None);
}

#[test]
fn stored_schedules_round_trip_and_bad_values_are_refused() {
    let mut s = cron_spec("*/5 * * * * *", "Asia/Tokyo");
    s.group = Some(b"g\0".to_vec());
    s.mode = PushMode::Delay(7);
    s.end = Some(NEW_YEAR);
    s.times = Some(9);
    let stored = Stored { spec: s, state: State { next: Some(NEW_YEAR - 5), fired: 3, last: Some(NEW_YEAR - 10) } };
    let b = stored.encode();
    assert_eq!(Stored::decode(&b), Ok(stored.clone()));
    let every = Stored { spec: spec(Timing::Every(10)), state: State::default() };
    assert_eq!(Stored::decode(&every.encode()), Ok(every));
    let unreadable = |b: &[u8]| Stored::decode(b).is_err_and(|e| e.message().contains("not a stored schedule"));
    for cut in 0..b.len() {
        assert!(unreadable(&b[..cut]), "cut at {cut}");
    }
    let mut longer = b.clone();
    longer.push(0);
    assert!(unreadable(&longer));
    assert!(unreadable(b"hello"));
}

/// A stored value is checked as RMQ.SCHEDULE SET checks its arguments (the same bounds),
/// and its state against its own START, END and TIMES.
#[test]
fn stored_schedules_are_checked_as_set_checks_them() {
    let good = Stored { spec: spec(Timing::Every(10)), state: State { next: Some(NEW_YEAR), fired: 2, last: Some(NEW_YEAR - 10) } };
    let bad = |why: &str, edit: &dyn Fn(&mut Stored)| {
        let mut s = good.clone();
        edit(&mut s);
        match Stored::decode(&s.encode()) {
            Err(e) => assert!(e.message().contains(why), "{why}: {}", e.message()),
            Ok(s) => panic!("{why}: accepted {s:?}"),
        }
    };
    bad("DELAY", &|s| s.spec.mode = PushMode::Delay(i64::MIN));
    bad("DELAY", &|s| s.spec.mode = PushMode::Delay(-1));
    bad("PRIORITY", &|s| s.spec.mode = PushMode::Priority(i64::MIN + 1));
    bad("RANGE", &|s| s.spec.mode = PushMode::Range(0));
    bad("AT is not", &|s| s.spec.mode = PushMode::At(NEW_YEAR));
    bad("EVERY", &|s| s.spec.timing = Timing::Every(0));
    bad("EVERY", &|s| s.spec.timing = Timing::Every(EVERY.max + 1));
    bad("START", &|s| s.spec.start = Some(5));
    bad("END", &|s| s.spec.end = Some(MAX_EXACT + 1));
    bad("START is after END", &|s| (s.spec.start, s.spec.end) = (Some(NEW_YEAR + 1), Some(NEW_YEAR)));
    bad("TIMES", &|s| s.spec.times = Some(1 << 60));
    bad("GROUP", &|s| s.spec.group = Some(Vec::new()));
    bad("GROUP", &|s| s.spec.group = Some(vec![b'g'; 1025]));
    bad("empty message", &|s| s.spec.message.clear());
    bad("planned time", &|s| s.spec.end = Some(NEW_YEAR - 1));
    bad("planned time", &|s| s.state.next = Some(-9_200_000_000_000_000_000));
    bad("planned time", &|s| s.state.last = Some(MAX_EXACT + 1));
    bad("planned time", &|s| s.spec.start = Some(NEW_YEAR + 1));
    bad("TIMES", &|s| s.spec.times = Some(2));
    let mut c = good.clone();
    c.spec = cron_spec("* * * * *", "UTC");
    let mut b = c.encode();
    let at = b.windows(3).position(|w| w == b"UTC").expect("the zone is stored");
    b[at..at + 3].copy_from_slice(b"XYZ");
    assert!(Stored::decode(&b).is_err_and(|e| e.message().contains("time zone")));
}

#[test]
fn delay_counts_from_the_planned_time() {
    let mut s = spec(Timing::Every(10));
    s.mode = PushMode::Delay(5);
    assert_eq!(s.push_mode(NEW_YEAR), PushMode::At(NEW_YEAR + 5));
    s.mode = PushMode::Priority(3);
    assert_eq!(s.push_mode(NEW_YEAR), PushMode::Priority(3));
}
