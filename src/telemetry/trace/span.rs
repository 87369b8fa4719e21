//! A span as weir keeps it until export: plain values, turned into
//! OTLP's protobuf messages only on the exporter's task.

use std::time::{SystemTime, UNIX_EPOCH};

/// An attribute's value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    /// A list of texts (`gen_ai.response.finish_reasons`).
    StrList(Vec<String>),
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Str(s.to_string())
    }
}
impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Str(s)
    }
}
impl From<u64> for Value {
    fn from(n: u64) -> Self {
        Value::Int(i64::try_from(n).unwrap_or(i64::MAX))
    }
}
impl From<u16> for Value {
    fn from(n: u16) -> Self {
        Value::Int(i64::from(n))
    }
}
impl From<f64> for Value {
    fn from(n: f64) -> Self {
        Value::Float(n)
    }
}
impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

/// Whether a span is the request weir served or a call it made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Server,
    Client,
}

/// A span's outcome: unset, or an error with why.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) enum Status {
    #[default]
    Unset,
    Error(String),
}

/// Something that happened at a moment of a span (`gen_ai.first_token`).
#[derive(Debug, Clone)]
pub(crate) struct Event {
    pub(crate) name: &'static str,
    pub(crate) at: u64,
    pub(crate) attributes: Vec<(&'static str, Value)>,
}

/// One span of one trace.
#[derive(Debug, Clone)]
pub(crate) struct Span {
    pub(crate) trace_id: [u8; 16],
    pub(crate) span_id: [u8; 8],
    pub(crate) parent: Option<[u8; 8]>,
    /// The `tracestate` a trusted client sent, passed on as it was.
    pub(crate) trace_state: String,
    pub(crate) name: String,
    pub(crate) kind: Kind,
    /// Nanoseconds since the Unix epoch.
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) attributes: Vec<(&'static str, Value)>,
    pub(crate) events: Vec<Event>,
    pub(crate) status: Status,
}

impl Span {
    pub(crate) fn new(trace_id: [u8; 16], parent: Option<[u8; 8]>, kind: Kind) -> Self {
        Span {
            trace_id,
            span_id: span_id(),
            parent,
            trace_state: String::new(),
            name: String::new(),
            kind,
            start: now(),
            end: 0,
            attributes: Vec::new(),
            events: Vec::new(),
            status: Status::Unset,
        }
    }

    /// Set `key` (once: a second value replaces the first).
    pub(crate) fn set(&mut self, key: &'static str, value: impl Into<Value>) {
        let value = value.into();
        match self.attributes.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => *v = value,
            None => self.attributes.push((key, value)),
        }
    }

    pub(crate) fn get(&self, key: &str) -> Option<&Value> {
        self.attributes
            .iter()
            .find_map(|(k, v)| (*k == key).then_some(v))
    }

    pub(crate) fn error(&mut self, why: impl Into<String>) {
        self.status = Status::Error(why.into());
    }

    pub(crate) fn end_now(&mut self) {
        if self.end == 0 {
            self.end = now().max(self.start);
        }
    }
}

/// Now, in nanoseconds since the Unix epoch (0 on a clock before it).
pub(crate) fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// A random trace id, never all zeros (W3C: invalid).
pub(crate) fn trace_id() -> [u8; 16] {
    let id = fastrand::u128(1..);
    id.to_be_bytes()
}

/// A random span id, never all zeros.
pub(crate) fn span_id() -> [u8; 8] {
    fastrand::u64(1..).to_be_bytes()
}
