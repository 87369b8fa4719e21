//! The way back to the client: the response body type, the one function that
//! renders every error weir generates, the value that says how a failure is
//! answered, and the access-log/metrics record
//! written when a response body ends.

mod body;
mod error;
mod record;
mod rescue;

pub use body::Payload;
pub use error::{ErrorShape, error_response};
pub use record::{InFlight, Recorded, RequestRecord};
pub use rescue::{Counted, Rescue};

/// What every response handed to hyper carries.
pub type ResponseBody = Recorded<Payload>;
