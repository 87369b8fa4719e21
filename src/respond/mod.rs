//! The way back to the client: the response body type, the one function that
//! renders every error weir generates, the value that says how a failure is
//! answered, and the access-log/metrics record
//! written when a response body ends.

mod body;
mod error;
mod record;
mod rescue;

pub use body::{BoxError, Guard, Payload, StreamBody};
pub use error::{ErrorShape, error_response, render, request_id};
pub use record::{
    Accountant, Accounting, InFlight, LlmFacts, Recorded, RequestRecord, SharedLlmFacts,
};
pub use rescue::{Counted, MAX_RETRY_AFTER, Rescue};

/// What every response handed to hyper carries.
pub type ResponseBody = Recorded<Payload>;
