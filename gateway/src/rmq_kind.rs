//! RMQ's own semantics through the SQS API: a queue's kind (the CreateQueue tag `rmq:kind`,
//! reported as the attribute `RmqKind`) and a message's place in its queue (the message
//! attributes `rmq.priority`, `rmq.range`, `rmq.at`), checked and turned into RMQ.PUSH's
//! mode. Pure, so every rule is tested without a server.

use std::collections::{BTreeMap, HashMap};

use crate::errors::{SqsError, SqsResult};
use crate::message::Attribute;

/// The CreateQueue tag that makes the queue of an RMQ kind.
pub const KIND_TAG: &str = "rmq:kind";
/// The queue attribute that reports (and stores) the kind.
pub const KIND_ATTRIBUTE: &str = "RmqKind";
/// The message attributes that place a message instead of being its data.
pub const PRIORITY: &str = "rmq.priority";
pub const RANGE: &str = "rmq.range";
pub const AT: &str = "rmq.at";

/// RMQ.PUSH's bounds (the module refuses anything outside them).
const MAX_PRIORITY: i64 = 1 << 53;
const MAX_RANGE_MS: i64 = 1 << 52;
const MIN_AT_MS: i64 = 946_684_800_000;
const MAX_AT_MS: i64 = 1 << 53;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Due at a time: SQS's own queues (DelaySeconds), and `rmq.at`.
    Fixed,
    /// Highest `rmq.priority` first; a send of a waiting body changes its priority.
    Priority,
    /// Due `rmq.range` ms after the first send of a body; later sends merge into it.
    Range,
}

impl Kind {
    pub fn parse(value: &str) -> SqsResult<Kind> {
        match value {
            "fixed" => Ok(Kind::Fixed),
            "priority" => Ok(Kind::Priority),
            "range" => Ok(Kind::Range),
            _ => Err(SqsError::invalid_parameter_value(format!(
                "Value {value} for tag {KIND_TAG} is invalid. Reason: must be priority, range or fixed."
            ))),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Fixed => "fixed",
            Kind::Priority => "priority",
            Kind::Range => "range",
        }
    }

    /// A queue's kind, from its stored attributes (a queue made without the tag is fixed).
    pub fn of(attrs: &HashMap<String, String>) -> Kind {
        attrs.get(KIND_ATTRIBUTE).and_then(|k| Kind::parse(k).ok()).unwrap_or(Kind::Fixed)
    }

    /// Whether sends merge by body (as RMQ.PUSH merges by content).
    pub fn merges(self) -> bool {
        self != Kind::Fixed
    }
}

/// The kind CreateQueue's tags ask for, `None` without the tag. FIFO queues keep SQS's order
/// (a group's messages in send order), so only `fixed` is allowed on them.
pub fn kind_of_tags(tags: &BTreeMap<String, String>, fifo: bool) -> SqsResult<Option<Kind>> {
    let Some(value) = tags.get(KIND_TAG) else { return Ok(None) };
    let kind = Kind::parse(value)?;
    if fifo && kind != Kind::Fixed {
        return Err(SqsError::invalid_parameter_value(format!(
            "Value {value} for tag {KIND_TAG} is invalid. Reason: a FIFO queue delivers in send order, so its kind is fixed."
        )));
    }
    Ok(Some(kind))
}

/// TagQueue: the kind cannot change, so `rmq:kind` may only name the queue's own.
pub fn check_tagging(kind: Kind, tags: &BTreeMap<String, String>) -> SqsResult<()> {
    match tags.get(KIND_TAG) {
        Some(v) if Kind::parse(v)? != kind => Err(SqsError::invalid_parameter_value(format!(
            "Value {v} for tag {KIND_TAG} is invalid. Reason: the queue is {}, and a queue's kind cannot be changed.",
            kind.as_str()
        ))),
        _ => Ok(()),
    }
}

/// Queue attributes a kind cannot honour: a priority queue delivers by priority, never by
/// time, so its DelaySeconds stays 0.
pub fn check_queue_attributes(kind: Kind, attrs: &BTreeMap<String, String>) -> SqsResult<()> {
    match attrs.get("DelaySeconds") {
        Some(d) if kind == Kind::Priority && d != "0" => Err(SqsError::invalid_attribute_value(
            "Invalid value for the parameter DelaySeconds: a priority queue (rmq:kind) delivers by priority, not by time.",
        )),
        _ => Ok(()),
    }
}

/// Where a message goes: RMQ.PUSH's mode and its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    Delay(i64),
    At(i64),
    Priority(i64),
    Range(i64),
}

impl Place {
    pub fn mode(self) -> (&'static str, i64) {
        match self {
            Place::Delay(ms) => ("DELAY", ms),
            Place::At(t) => ("AT", t),
            Place::Priority(p) => ("PRIORITY", p),
            Place::Range(ms) => ("RANGE", ms),
        }
    }
}

/// Takes the place attributes out of `attrs` (they are the message's place, not its data:
/// neither stored nor received) and answers where the message goes. `delay` is the send's
/// DelaySeconds, `queue_delay` the queue's (seconds).
pub fn place(kind: Kind, fifo: bool, attrs: &mut BTreeMap<String, Attribute>, delay: Option<i64>, queue_delay: i64) -> SqsResult<Place> {
    let given: Vec<&str> = [PRIORITY, RANGE, AT].into_iter().filter(|n| attrs.contains_key(*n)).collect();
    let wanted = match kind {
        Kind::Priority => PRIORITY,
        Kind::Range => RANGE,
        Kind::Fixed => AT,
    };
    if let Some(wrong) = given.iter().find(|n| **n != wanted) {
        let kind_of = match *wrong {
            PRIORITY => "priority",
            RANGE => "range",
            _ => "fixed",
        };
        return Err(SqsError::invalid_parameter_value(format!(
            "The message attribute {wrong} is for {kind_of} queues (tag {KIND_TAG} = {kind_of}); this queue is {}.",
            kind.as_str()
        )));
    }
    let value = match attrs.remove(wanted) {
        Some(a) => Some(integer(wanted, &a)?),
        None => None,
    };
    // A message that names its place takes no other delay (DelaySeconds 0 is what the SDKs
    // send); a DelaySeconds given, 0 too, overrides the queue's.
    let delay_ms = delay.unwrap_or(queue_delay) * 1000;
    let delay = delay.filter(|d| *d != 0);
    if let (Some(_), Some(d)) = (value, delay) {
        return Err(SqsError::invalid_parameter_value(format!(
            "Value {d} for parameter DelaySeconds is invalid. Reason: the message attribute {wanted} gives the message's place."
        )));
    }
    let out_of = |lo: i64, hi: i64, what: &str| {
        SqsError::invalid_parameter_value(format!("The message attribute {wanted} must be an integer from {lo} to {hi} ({what})."))
    };
    Ok(match kind {
        Kind::Priority => {
            if let Some(d) = delay {
                return Err(SqsError::invalid_parameter_value(format!(
                    "Value {d} for parameter DelaySeconds is invalid. Reason: a priority queue delivers by priority, not by time."
                )));
            }
            let p = value.unwrap_or(0);
            if p.abs() > MAX_PRIORITY {
                return Err(out_of(-MAX_PRIORITY, MAX_PRIORITY, "the higher, the sooner"));
            }
            Place::Priority(p)
        }
        Kind::Range => match value {
            Some(ms) if !(1..=MAX_RANGE_MS).contains(&ms) => return Err(out_of(1, MAX_RANGE_MS, "ms")),
            Some(ms) => Place::Range(ms),
            // RMQ's RANGE is at least 1 ms: due at once, as a delay of 0.
            None => Place::Range(delay_ms.max(1)),
        },
        Kind::Fixed => match value {
            Some(_) if fifo => {
                return Err(SqsError::invalid_parameter_value(format!(
                    "The message attribute {AT} is not valid for a FIFO queue: its messages are delivered in send order."
                )))
            }
            Some(t) if !(MIN_AT_MS..=MAX_AT_MS).contains(&t) => return Err(out_of(MIN_AT_MS, MAX_AT_MS, "Unix time in ms")),
            Some(t) => Place::At(t),
            None => Place::Delay(delay_ms),
        },
    })
}

/// A place attribute's value: a Number holding an integer.
fn integer(name: &str, a: &Attribute) -> SqsResult<i64> {
    let not = |why: &str| SqsError::invalid_parameter_value(format!("The message attribute {name} must be {why}."));
    if a.data_type.split('.').next() != Some("Number") {
        return Err(not("of DataType Number"));
    }
    let s = a.string_value.as_deref().unwrap_or("");
    let digits = s.strip_prefix(['-', '+']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(not("an integer"));
    }
    // Past i64 is past every bound: report it as out of range, not as no integer.
    Ok(s.parse::<i64>().unwrap_or(if s.starts_with('-') { i64::MIN } else { i64::MAX }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn number(v: &str) -> Attribute {
        Attribute { data_type: "Number".into(), string_value: Some(v.into()), binary_value: None }
    }

    fn attrs(pairs: &[(&str, Attribute)]) -> BTreeMap<String, Attribute> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
    }

    fn code(r: SqsResult<Place>) -> &'static str {
        r.unwrap_err().code
    }

    #[test]
    fn kinds_from_tags() {
        let tags = |v: &str| BTreeMap::from([(KIND_TAG.to_string(), v.to_string())]);
        assert_eq!(kind_of_tags(&BTreeMap::new(), false).unwrap(), None);
        assert_eq!(kind_of_tags(&tags("priority"), false).unwrap(), Some(Kind::Priority));
        assert_eq!(kind_of_tags(&tags("range"), false).unwrap(), Some(Kind::Range));
        assert_eq!(kind_of_tags(&tags("fixed"), true).unwrap(), Some(Kind::Fixed));
        for bad in ["Priority", "", "lifo"] {
            assert_eq!(kind_of_tags(&tags(bad), false).unwrap_err().code, "InvalidParameterValue", "{bad}");
        }
        assert_eq!(kind_of_tags(&tags("range"), true).unwrap_err().code, "InvalidParameterValue", "not on FIFO");
        assert_eq!(Kind::of(&HashMap::new()), Kind::Fixed);
        assert_eq!(Kind::of(&HashMap::from([(KIND_ATTRIBUTE.to_string(), "range".to_string())])), Kind::Range);
        assert!(Kind::Priority.merges() && Kind::Range.merges() && !Kind::Fixed.merges());
    }

    #[test]
    fn tagging_cannot_change_the_kind() {
        let tags = |v: &str| BTreeMap::from([(KIND_TAG.to_string(), v.to_string()), ("team".to_string(), "a".to_string())]);
        assert!(check_tagging(Kind::Priority, &tags("priority")).is_ok());
        assert!(check_tagging(Kind::Fixed, &tags("fixed")).is_ok());
        assert!(check_tagging(Kind::Fixed, &BTreeMap::new()).is_ok());
        assert_eq!(check_tagging(Kind::Fixed, &tags("range")).unwrap_err().code, "InvalidParameterValue");
        assert_eq!(check_tagging(Kind::Range, &tags("bogus")).unwrap_err().code, "InvalidParameterValue");
    }

    #[test]
    fn priority_queues_take_no_delay() {
        let delay = |v: &str| BTreeMap::from([("DelaySeconds".to_string(), v.to_string())]);
        assert!(check_queue_attributes(Kind::Priority, &delay("0")).is_ok());
        assert!(check_queue_attributes(Kind::Range, &delay("5")).is_ok());
        assert_eq!(check_queue_attributes(Kind::Priority, &delay("5")).unwrap_err().code, "InvalidAttributeValue");
    }

    #[test]
    fn places_of_each_kind() {
        let mut a = attrs(&[(PRIORITY, number("7")), ("tier", number("1"))]);
        assert_eq!(place(Kind::Priority, false, &mut a, Some(0), 0).unwrap(), Place::Priority(7));
        assert_eq!(a.keys().collect::<Vec<_>>(), ["tier"], "the place is not data");
        assert_eq!(place(Kind::Priority, false, &mut BTreeMap::new(), None, 0).unwrap(), Place::Priority(0));
        assert_eq!(place(Kind::Range, false, &mut attrs(&[(RANGE, number("250"))]), None, 3).unwrap(), Place::Range(250));
        assert_eq!(place(Kind::Range, false, &mut BTreeMap::new(), None, 3).unwrap(), Place::Range(3000));
        assert_eq!(place(Kind::Range, false, &mut BTreeMap::new(), Some(2), 3).unwrap(), Place::Range(2000));
        assert_eq!(place(Kind::Range, false, &mut BTreeMap::new(), None, 0).unwrap(), Place::Range(1));
        let week = 1_700_000_000_000 + 7 * 86_400_000;
        assert_eq!(place(Kind::Fixed, false, &mut attrs(&[(AT, number(&week.to_string()))]), None, 5).unwrap(), Place::At(week));
        assert_eq!(place(Kind::Fixed, false, &mut BTreeMap::new(), None, 5).unwrap(), Place::Delay(5000));
        assert_eq!(place(Kind::Fixed, false, &mut BTreeMap::new(), Some(0), 5).unwrap(), Place::Delay(0), "0 given is 0");
        assert_eq!(place(Kind::Fixed, true, &mut BTreeMap::new(), None, 0).unwrap(), Place::Delay(0));
        assert_eq!(Place::Range(9).mode(), ("RANGE", 9));
        assert_eq!(Place::At(9).mode(), ("AT", 9));
    }

    #[test]
    fn wrong_places_are_refused() {
        let bad = |kind, fifo, a: &[(&str, Attribute)], delay| code(place(kind, fifo, &mut attrs(a), delay, 0));
        assert_eq!(bad(Kind::Fixed, false, &[(PRIORITY, number("1"))], None), "InvalidParameterValue");
        assert_eq!(bad(Kind::Priority, false, &[(RANGE, number("1"))], None), "InvalidParameterValue");
        assert_eq!(bad(Kind::Range, false, &[(AT, number("1700000000000"))], None), "InvalidParameterValue");
        assert_eq!(bad(Kind::Fixed, true, &[(AT, number("1700000000000"))], None), "InvalidParameterValue", "FIFO");
        let string = Attribute { data_type: "String".into(), string_value: Some("5".into()), binary_value: None };
        assert_eq!(bad(Kind::Priority, false, &[(PRIORITY, string)], None), "InvalidParameterValue", "not a Number");
        for v in ["1.5", "1e3", "", "-"] {
            assert_eq!(bad(Kind::Priority, false, &[(PRIORITY, number(v))], None), "InvalidParameterValue", "{v}");
        }
        let huge = "9".repeat(30);
        assert_eq!(bad(Kind::Priority, false, &[(PRIORITY, number(&huge))], None), "InvalidParameterValue");
        assert_eq!(bad(Kind::Priority, false, &[(PRIORITY, number(&(MAX_PRIORITY + 1).to_string()))], None), "InvalidParameterValue");
        assert!(place(Kind::Priority, false, &mut attrs(&[(PRIORITY, number(&(-MAX_PRIORITY).to_string()))]), None, 0).is_ok());
        assert_eq!(bad(Kind::Range, false, &[(RANGE, number("0"))], None), "InvalidParameterValue");
        assert_eq!(bad(Kind::Range, false, &[(RANGE, number(&(MAX_RANGE_MS + 1).to_string()))], None), "InvalidParameterValue");
        assert_eq!(bad(Kind::Fixed, false, &[(AT, number("1700000000"))], None), "InvalidParameterValue", "seconds, not ms");
        assert_eq!(bad(Kind::Fixed, false, &[(AT, number("1700000000000"))], Some(5)), "InvalidParameterValue", "and a delay");
        assert_eq!(bad(Kind::Priority, false, &[], Some(5)), "InvalidParameterValue", "a delay on priority");
        let r = place(Kind::Range, false, &mut attrs(&[(RANGE, number("5"))]), Some(0), 0);
        assert_eq!(r.unwrap(), Place::Range(5), "DelaySeconds 0 is no delay");
    }
}
