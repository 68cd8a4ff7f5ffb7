//! Driver errors as Nomad's client reads them: a start that may succeed if tried again is
//! `FailedPrecondition` carrying a `RecoverableError{recoverable: true}` detail (Nomad reads
//! only the first detail), which lets the job's restart policy apply; any other error fails
//! the task.

use paddock_core::drivermanager::DriverCallError;
use paddock_core::drivermanager::types::DriverError;
use prost::Message;
use tonic::{Code, Status};

use crate::proto::google::rpc;
use crate::proto::structs::RecoverableError;

/// The type URL of Nomad's recoverable-error detail.
pub const RECOVERABLE_TYPE_URL: &str =
    "type.googleapis.com/hashicorp.nomad.plugins.shared.structs.RecoverableError";

/// A status with the recoverable-error detail.
pub fn with_recoverable(code: Code, message: String, recoverable: bool) -> Status {
    let detail = prost_types::Any {
        type_url: RECOVERABLE_TYPE_URL.into(),
        value: RecoverableError { recoverable }.encode_to_vec(),
    };
    let details = rpc::Status {
        code: code as i32,
        message: message.clone(),
        details: vec![detail],
    }
    .encode_to_vec();
    Status::with_details(code, message, details.into())
}

/// The recoverable flag a status carries, if it carries Nomad's detail first.
pub fn recoverable_of(status: &Status) -> Option<bool> {
    let details = rpc::Status::decode(status.details()).ok()?;
    let first = details.details.first()?;
    (first.type_url == RECOVERABLE_TYPE_URL)
        .then(|| RecoverableError::decode(first.value.as_slice()).ok())
        .flatten()
        .map(|r| r.recoverable)
}

/// A failed driver call, for a start: recoverable or not, as the driver (or the host, for a
/// missed deadline or a trap) says.
pub fn start_error(e: &DriverCallError) -> Status {
    match e {
        DriverCallError::Driver(DriverError::InvalidConfig(_)) => {
            with_recoverable(Code::InvalidArgument, e.to_string(), false)
        }
        _ => with_recoverable(Code::FailedPrecondition, e.to_string(), e.recoverable()),
    }
}

/// A failed driver call, for any other operation.
pub fn call_error(e: &DriverCallError) -> Status {
    match e {
        DriverCallError::Driver(DriverError::TaskNotFound(m)) => Status::not_found(m.clone()),
        DriverCallError::Driver(DriverError::NotSupported(m)) => Status::unimplemented(m.clone()),
        DriverCallError::Driver(DriverError::InvalidConfig(_)) => {
            Status::invalid_argument(e.to_string())
        }
        _ => Status::internal(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_detail_reads_back() {
        let s = with_recoverable(Code::FailedPrecondition, "busy".into(), true);
        assert_eq!(s.code(), Code::FailedPrecondition);
        assert_eq!(recoverable_of(&s), Some(true));
        assert_eq!(recoverable_of(&Status::internal("x")), None);
    }
}
