//! Reading a request into its typed form (the action's `#[derive(Deserialize)]` struct),
//! and the field types that carry SQS's checks, so that a request that reads is valid as
//! far as its fields go. An error names the field as SQS does: a field type's check leaves
//! its SqsError (made from the field's name) for `parse`, which knows the name from where
//! the read stopped (serde_path_to_error); serde's own errors (a missing field, a wrong
//! type, a body that is not JSON) become SQS's MissingParameter and SerializationException.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashSet};
use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::errors::{SqsError, SqsResult};
use crate::input::valid_queue_name;
use crate::message::Attribute;

/// An SqsError made from the name of the field it is about.
type Pending = Box<dyn FnOnce(&str) -> SqsError>;

thread_local! {
    /// The check that failed during the read in progress on this thread (a read is
    /// synchronous, and `parse` clears it first), innermost first.
    static FAILED: RefCell<Option<Pending>> = const { RefCell::new(None) };
}

/// Fails the read with `e`, unless a check inside it failed already.
pub fn fail<E: serde::de::Error>(e: impl FnOnce(&str) -> SqsError + 'static) -> E {
    FAILED.with(|f| {
        let mut f = f.borrow_mut();
        if f.is_none() {
            *f = Some(Box::new(e));
        }
    });
    E::custom("a field check failed")
}

/// The error code and message `parse` refuses `body` with (the request types' tests).
#[cfg(test)]
pub fn refused<T: DeserializeOwned + std::fmt::Debug>(body: &str) -> (&'static str, String) {
    let e = parse::<T>(body.as_bytes()).unwrap_err();
    (e.code, e.message)
}

/// The request `body` (AWS JSON 1.0: an object; an empty body is `{}`) as `T`.
pub fn parse<T: DeserializeOwned>(body: &[u8]) -> SqsResult<T> {
    let body: &[u8] = if body.is_empty() { b"{}" } else { body };
    // An object only: serde would read a struct from a list too.
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(match serde_json::from_slice::<serde::de::IgnoredAny>(body) {
            Ok(_) => SqsError::serialization("The request body must be a JSON object"),
            Err(_) => SqsError::serialization("The request body is not valid JSON"),
        });
    }
    FAILED.with(|f| f.borrow_mut().take());
    let mut de = serde_json::Deserializer::from_slice(body);
    let read = serde_path_to_error::deserialize(&mut de);
    if read.is_ok() && de.end().is_err() {
        return Err(SqsError::serialization("The request body is not valid JSON"));
    }
    read.map_err(|e| {
        // A body that is not JSON says so, whatever failed first.
        if serde_json::from_slice::<serde::de::IgnoredAny>(body).is_err() {
            FAILED.with(|f| f.borrow_mut().take());
            return SqsError::serialization("The request body is not valid JSON");
        }
        let path = e.path().to_string();
        let field = e
            .path()
            .iter()
            .rev()
            .find_map(|s| match s {
                serde_path_to_error::Segment::Map { key } => Some(key.clone()),
                _ => None,
            })
            .unwrap_or_default();
        if let Some(failed) = FAILED.with(|f| f.borrow_mut().take()) {
            return failed(&field);
        }
        let inner = e.into_inner();
        let text = inner.to_string();
        let text = text.rsplit_once(" at line ").map_or(text.as_str(), |(t, _)| t);
        if let Some(name) = text.strip_prefix("missing field `").and_then(|t| t.strip_suffix('`')) {
            return SqsError::missing_parameter(format!("The request must contain the parameter {name}."));
        }
        if text.starts_with("invalid type: null") {
            return SqsError::missing_parameter(format!("The request must contain the parameter {field}."));
        }
        SqsError::serialization(format!("{path}: {text}"))
    })
}

/// The queue a QueueUrl names (its last path segment).
#[derive(Debug)]
pub struct QueueUrl(pub String);

impl<'de> Deserialize<'de> for QueueUrl {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let url = String::deserialize(d)?;
        let name = url.trim_end_matches('/').rsplit('/').next().unwrap_or("");
        if valid_queue_name(name) {
            Ok(QueueUrl(name.to_string()))
        } else {
            Err(fail(|_| SqsError::queue_does_not_exist("The specified queue does not exist.")))
        }
    }
}

/// A request that names a queue and nothing else.
#[derive(Deserialize, Debug)]
#[serde(rename_all = "PascalCase")]
pub struct ByQueueUrl {
    pub queue_url: QueueUrl,
}

/// An integer from LO to HI, as SQS checks one (with its own text).
#[derive(Debug, Clone, Copy)]
pub struct Bounded<const LO: i64, const HI: i64>(pub i64);

impl<'de, const LO: i64, const HI: i64> Deserialize<'de> for Bounded<LO, HI> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        match v.as_i64() {
            Some(n) if (LO..=HI).contains(&n) => Ok(Bounded(n)),
            // Null is absent: the field is required (else it would be an Option).
            _ if v.is_null() => Err(fail(|name| SqsError::missing_parameter(format!("The request must contain the parameter {name}.")))),
            _ => Err(fail(move |name| out_of_bounds(name, &v, LO, HI))),
        }
    }
}

/// `v` (a field `name` read as it came) as an integer from `lo` to `hi`: for an entry's field
/// that fails only its entry.
pub fn bounded(name: &str, v: &Value, lo: i64, hi: i64) -> SqsResult<i64> {
    match v.as_i64() {
        Some(n) if (lo..=hi).contains(&n) => Ok(n),
        _ => Err(out_of_bounds(name, v, lo, hi)),
    }
}

fn out_of_bounds(name: &str, v: &Value, lo: i64, hi: i64) -> SqsError {
    // SQS's own text.
    SqsError::invalid_parameter_value(format!(
        "Value {v} for parameter {name} is invalid. Reason: Must be between {lo} and {hi}, if provided."
    ))
}

/// Message attributes (MessageAttributes, MessageSystemAttributes): a value that does not
/// read as attributes is InvalidParameterValue.
#[derive(Debug, Default)]
pub struct Attributes(pub BTreeMap<String, Attribute>);

impl<'de> Deserialize<'de> for Attributes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Read whole first: SQS's text names the field, then says what is wrong inside.
        let v = Value::deserialize(d)?;
        if v.is_null() {
            return Ok(Attributes::default());
        }
        serde_json::from_value(v).map(Attributes).map_err(|e| {
            let why = e.to_string();
            fail(move |name| SqsError::invalid_parameter_value(format!("{name}: {why}")))
        })
    }
}

/// A batch's entry: its Id, and the action its batch is (SQS's texts name it).
pub trait BatchEntry {
    const ACTION: &'static str;
    fn id(&self) -> &str;
}

/// A batch's entries after the batch-wide checks SQS makes: 1 to 10 entries with distinct
/// valid ids.
#[derive(Debug)]
pub struct Entries<T>(pub Vec<T>);

impl<'de, T: BatchEntry + Deserialize<'de>> Deserialize<'de> for Entries<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let entries: Vec<T> = Vec::<Object<T>>::deserialize(d)?.into_iter().map(|o| o.0).collect();
        check_entries(&entries).map_err(|e| fail(move |_| e))?;
        Ok(Entries(entries))
    }
}

fn check_entries<T: BatchEntry>(entries: &[T]) -> SqsResult<()> {
    if entries.is_empty() {
        return Err(SqsError::empty_batch_request(format!("There should be at least one {}RequestEntry in the request.", T::ACTION)));
    }
    if entries.len() > 10 {
        return Err(SqsError::too_many_entries(format!("Maximum number of entries per request are 10. You have sent {}.", entries.len())));
    }
    let mut seen = HashSet::new();
    for e in entries {
        let id = e.id();
        if id.is_empty() || id.len() > 80 || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
            return Err(SqsError::invalid_batch_entry_id(
                "A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long.",
            ));
        }
        if !seen.insert(id) {
            return Err(SqsError::batch_ids_not_distinct(format!("Id {id} repeated.")));
        }
    }
    Ok(())
}

/// A list of strings where null is the empty list.
#[derive(Debug, Default)]
pub struct Names(pub Vec<String>);

impl<'de> Deserialize<'de> for Names {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Names(Option::<Vec<String>>::deserialize(d)?.unwrap_or_default()))
    }
}

/// A map of strings where null is the empty map.
#[derive(Debug, Default)]
pub struct StringMap(pub BTreeMap<String, String>);

impl<'de> Deserialize<'de> for StringMap {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(StringMap(Option::<BTreeMap<String, String>>::deserialize(d)?.unwrap_or_default()))
    }
}

/// Keeps `T` from being read from a list: SQS's structures are JSON objects only.
#[derive(Debug)]
pub struct Object<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for V<T> {
            type Value = T;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(map))
            }
        }
        d.deserialize_map(V(PhantomData)).map(Object)
    }
}
