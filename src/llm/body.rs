//! The request body of an LLM route: read whole (weir routes by the model
//! it names, and may send it to more than one upstream), under the route's
//! size limit, the minimum data rate, and a process-wide byte budget; then
//! the top-level `model` found without re-serialising anything, and
//! replaced in place when an upstream names the model differently, so
//! every other byte (`cache_control` blocks included) reaches the upstream
//! as the client sent it.

use std::ops::Range;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::proxy::{BodyTooLarge, BodyTooSlow, RequestBody};

/// Bytes of request bodies held in memory by LLM routes, process-wide.
#[derive(Clone, Default)]
pub struct ByteBudget(Option<Arc<Semaphore>>);

impl ByteBudget {
    /// A budget of `bytes`; 0 = no bound.
    pub fn new(bytes: u64) -> Self {
        ByteBudget((bytes > 0).then(|| Arc::new(Semaphore::new(bytes as usize))))
    }

    fn reserve(&self, bytes: u64, held: &mut Option<OwnedSemaphorePermit>) -> bool {
        let Some(sem) = &self.0 else {
            return true;
        };
        if bytes == 0 {
            return true;
        }
        let Ok(n) = u32::try_from(bytes) else {
            return false;
        };
        match sem.clone().try_acquire_many_owned(n) {
            Ok(p) => {
                match held {
                    Some(h) => h.merge(p),
                    None => *held = Some(p),
                }
                true
            }
            Err(_) => false,
        }
    }

    /// Bytes reserved now (for tests and the admin view).
    pub fn in_use(&self, limit: u64) -> u64 {
        self.0
            .as_ref()
            .map_or(0, |s| limit - s.available_permits() as u64)
    }
}

/// A body read whole, and its place in the budget (released on drop).
pub struct ReadBody {
    pub bytes: Bytes,
    _reservation: Option<OwnedSemaphorePermit>,
}

/// Why a body could not be read.
#[derive(Debug, PartialEq, Eq)]
pub enum ReadError {
    TooLarge,
    TooSlow,
    Unreadable,
    /// The process-wide budget is spent: shed.
    OverBudget,
}

/// Read `body` whole, reserving its declared length up front and growing
/// the reservation as an undeclared (chunked) body arrives.
pub async fn read(
    mut body: RequestBody,
    declared: Option<u64>,
    budget: &ByteBudget,
) -> Result<ReadBody, ReadError> {
    let mut reservation = None;
    let mut reserved = declared.unwrap_or(0);
    if !budget.reserve(reserved, &mut reservation) {
        return Err(ReadError::OverBudget);
    }
    let mut buf = BytesMut::with_capacity(declared.unwrap_or(0).min(1 << 20) as usize);
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| {
            if e.is::<BodyTooLarge>() {
                ReadError::TooLarge
            } else if e.is::<BodyTooSlow>() {
                ReadError::TooSlow
            } else {
                ReadError::Unreadable
            }
        })?;
        if let Ok(data) = frame.into_data() {
            let after = (buf.len() + data.len()) as u64;
            if after > reserved {
                if !budget.reserve(after - reserved, &mut reservation) {
                    return Err(ReadError::OverBudget);
                }
                reserved = after;
            }
            buf.extend_from_slice(&data);
        }
    }
    Ok(ReadBody {
        bytes: buf.freeze(),
        _reservation: reservation,
    })
}

/// An upstream's whole (non-streamed) answer, as far as it was read.
pub enum Answer {
    /// All of it, held under the budget.
    Whole(ReadBody),
    /// Too large (or the budget too short) to hold for its usage: what was
    /// read, and the rest still to come, to be relayed as they stream.
    Streaming {
        head: Bytes,
        rest: hyper::body::Incoming,
    },
}

/// An upstream's whole (non-streamed) answer read under the same budget
/// as request bodies, at most `limit` bytes: reserved up front when its
/// length is declared, growing as an undeclared one arrives. Past the
/// limit or the budget, `must_hold` (an answer to translate) fails;
/// otherwise the answer is handed back to be streamed on.
pub async fn read_answer(
    mut body: hyper::body::Incoming,
    declared: Option<u64>,
    budget: &ByteBudget,
    limit: usize,
    must_hold: bool,
) -> Result<Answer, ReadError> {
    let mut reservation = None;
    let mut reserved = 0;
    let mut buf = BytesMut::new();
    let fits = |n: u64, reservation: &mut Option<OwnedSemaphorePermit>, reserved: &mut u64| {
        if n <= *reserved {
            return Ok(());
        }
        if n > limit as u64 {
            return Err(ReadError::TooLarge);
        }
        if !budget.reserve(n - *reserved, reservation) {
            return Err(ReadError::OverBudget);
        }
        *reserved = n;
        Ok(())
    };
    if let Some(n) = declared {
        match fits(n, &mut reservation, &mut reserved) {
            Ok(()) => buf.reserve(n.min(1 << 20) as usize),
            Err(e) if must_hold => return Err(e),
            Err(_) => {
                return Ok(Answer::Streaming {
                    head: Bytes::new(),
                    rest: body,
                });
            }
        }
    }
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| ReadError::Unreadable)?;
        if let Ok(data) = frame.into_data() {
            let after = buf.len().saturating_add(data.len()) as u64;
            match fits(after, &mut reservation, &mut reserved) {
                Ok(()) => buf.extend_from_slice(&data),
                Err(e) if must_hold => return Err(e),
                Err(_) => {
                    buf.extend_from_slice(&data);
                    return Ok(Answer::Streaming {
                        head: buf.freeze(),
                        rest: body,
                    });
                }
            }
        }
    }
    Ok(Answer::Whole(ReadBody {
        bytes: buf.freeze(),
        _reservation: reservation,
    }))
}

/// What was read of an answer, then the rest as it arrives.
pub struct Prefixed {
    head: Option<Bytes>,
    rest: hyper::body::Incoming,
}

impl Prefixed {
    pub fn new(head: Bytes, rest: hyper::body::Incoming) -> Self {
        Prefixed {
            head: (!head.is_empty()).then_some(head),
            rest,
        }
    }
}

impl http_body::Body for Prefixed {
    type Data = Bytes;
    type Error = crate::respond::BoxError;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        if let Some(head) = self.head.take() {
            return std::task::Poll::Ready(Some(Ok(http_body::Frame::data(head))));
        }
        std::pin::Pin::new(&mut self.rest)
            .poll_frame(cx)
            .map_err(|e| Box::new(e) as crate::respond::BoxError)
    }
}

/// The `model` a request names, and where its JSON string sits in the body.
#[derive(Debug, PartialEq, Eq)]
pub struct Model {
    pub name: String,
    pub span: Range<usize>,
    /// The conversation the body names, if any: Codex's
    /// `prompt_cache_key`, else Anthropic's `metadata.user_id` (which
    /// Claude Code makes per session).
    pub conversation: Option<String>,
    /// Whether the client asks for a stream.
    pub stream: bool,
    /// The most output the request allows, in whichever field its API
    /// names it (`max_tokens`, `max_output_tokens`,
    /// `max_completion_tokens`; the largest when several are set).
    pub max_output: Option<u64>,
}

#[derive(Deserialize)]
struct Probe<'a> {
    #[serde(borrow, default)]
    model: Option<&'a RawValue>,
    #[serde(borrow, default)]
    prompt_cache_key: Option<&'a RawValue>,
    #[serde(borrow, default)]
    metadata: Option<&'a RawValue>,
    #[serde(borrow, default)]
    stream: Option<&'a RawValue>,
    #[serde(borrow, default)]
    max_tokens: Option<&'a RawValue>,
    #[serde(borrow, default)]
    max_output_tokens: Option<&'a RawValue>,
    #[serde(borrow, default)]
    max_completion_tokens: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct MetadataProbe<'a> {
    #[serde(borrow, default)]
    user_id: Option<&'a RawValue>,
}

/// Why a body names no usable model.
#[derive(Debug, PartialEq, Eq)]
pub enum ModelError {
    NotJson,
    Missing,
}

/// Find the top-level `model`. The whole document must be valid JSON (an
/// upstream would refuse it anyway); nothing but `model` is kept.
pub fn model(body: &[u8]) -> Result<Model, ModelError> {
    let probe: Probe<'_> = serde_json::from_slice(body).map_err(|_| ModelError::NotJson)?;
    let raw = probe.model.ok_or(ModelError::Missing)?;
    let name: String = serde_json::from_str(raw.get()).map_err(|_| ModelError::Missing)?;
    // Found in the same pass; only the small `metadata` value is read
    // again, and a field of another shape is no conversation (never an
    // error: an upstream judges the body).
    let text = |raw: &RawValue| serde_json::from_str::<String>(raw.get()).ok();
    let conversation = probe
        .prompt_cache_key
        .and_then(text)
        .or_else(|| {
            let meta: MetadataProbe<'_> = serde_json::from_str(probe.metadata?.get()).ok()?;
            meta.user_id.and_then(text)
        })
        .filter(|c| !c.is_empty());
    let max_output = [
        probe.max_tokens,
        probe.max_output_tokens,
        probe.max_completion_tokens,
    ]
    .into_iter()
    .flatten()
    .filter_map(|raw| raw.get().parse::<u64>().ok())
    .max();
    // The raw value borrows from `body`: its offset is where it was written.
    let start = raw.get().as_ptr() as usize - body.as_ptr() as usize;
    Ok(Model {
        name,
        span: start..start + raw.get().len(),
        conversation,
        stream: probe.stream.is_some_and(|s| s.get() == "true"),
        max_output,
    })
}

/// `body` with the model at `span` replaced by `name`; every other byte
/// unchanged.
pub fn splice(body: &Bytes, span: &Range<usize>, name: &str) -> Bytes {
    let quoted = serde_json::Value::String(name.to_string()).to_string();
    let mut out = BytesMut::with_capacity(body.len() + quoted.len());
    out.extend_from_slice(&body[..span.start]);
    out.extend_from_slice(quoted.as_bytes());
    out.extend_from_slice(&body[span.end..]);
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_is_found_and_replaced_in_place() {
        let body = Bytes::from_static(
            br#"{"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}],  "model" : "claude-x","max_tokens":5}"#,
        );
        let m = model(&body).expect("model");
        assert_eq!(m.name, "claude-x");
        assert_eq!(&body[m.span.clone()], br#""claude-x""#);
        let out = splice(&body, &m.span, "upstream-id");
        let expected = String::from_utf8_lossy(&body).replace("\"claude-x\"", "\"upstream-id\"");
        assert_eq!(out, Bytes::from(expected), "only the model changed");
    }

    #[test]
    fn the_output_limit_and_stream_are_found_in_the_same_pass() {
        let of = |body: &str| {
            let m = model(body.as_bytes()).expect("model");
            (m.max_output, m.stream)
        };
        assert_eq!(
            of(r#"{"model":"m","max_tokens":64,"stream":true}"#),
            (Some(64), true)
        );
        assert_eq!(
            of(r#"{"model":"m","max_output_tokens":7}"#),
            (Some(7), false)
        );
        assert_eq!(
            of(r#"{"model":"m","max_tokens":5,"max_completion_tokens":9,"stream":false}"#),
            (Some(9), false)
        );
        assert_eq!(of(r#"{"model":"m","max_tokens":"many"}"#), (None, false));
    }

    #[test]
    fn the_conversation_is_found_in_the_same_pass() {
        let of = |body: &str| model(body.as_bytes()).expect("model").conversation;
        assert_eq!(
            of(r#"{"model":"m","prompt_cache_key":"conv-1","metadata":{"user_id":"u"}}"#),
            Some("conv-1".into())
        );
        assert_eq!(
            of(r#"{"model":"m","metadata":{"user_id":"user_x_session_y"}}"#),
            Some("user_x_session_y".into())
        );
        for none in [
            r#"{"model":"m"}"#,
            r#"{"model":"m","metadata":null,"prompt_cache_key":7}"#,
            r#"{"model":"m","metadata":{"user_id":""}}"#,
            r#"{"model":"m","metadata":[1]}"#,
        ] {
            assert_eq!(of(none), None, "{none}");
        }
    }

    #[test]
    fn nested_models_do_not_count_and_bad_json_is_refused() {
        assert_eq!(
            model(br#"{"metadata":{"model":"x"}}"#),
            Err(ModelError::Missing)
        );
        assert_eq!(model(b"{\"model\": \"x\""), Err(ModelError::NotJson));
        assert_eq!(model(br#"{"model": 5}"#), Err(ModelError::Missing));
    }

    #[test]
    fn the_budget_is_reserved_and_released() {
        let budget = ByteBudget::new(100);
        let mut held = None;
        assert!(budget.reserve(60, &mut held));
        assert!(budget.reserve(30, &mut held));
        let mut other = None;
        assert!(!budget.reserve(20, &mut other), "over budget");
        assert_eq!(budget.in_use(100), 90);
        drop(held);
        assert_eq!(budget.in_use(100), 0);
    }
}
