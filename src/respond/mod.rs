//! The way back to the client: the response body type, the one function that
//! renders every error weir generates, the value that says how a failure is
//! answered, and the access-log/metrics record
//! written when a response body ends.

mod body;
mod error;
mod pages;
mod record;
mod rescue;

pub(crate) use body::{BoxError, Guard, Payload, StreamBody};
pub(crate) use error::{ErrorShape, error_response, render};
pub(crate) use pages::intercept as intercept_error_page;
pub(crate) use record::{
    AccessLine, InFlight, KindRecord, MAX_MODEL_FIELD, Outcome, Recorded, RequestRecord, bounded,
};
pub(crate) use rescue::{Counted, Rescue};

/// What every response handed to hyper carries.
pub(crate) type ResponseBody = Recorded<Payload>;
