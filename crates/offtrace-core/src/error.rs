//! The services' error type; each variant has a stable C status code (`offtrace_status_t`).

/// Why a service call was refused. `code()` is the C API's `offtrace_status_t` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ServiceError {
    #[error("unspecified error")]
    Unknown,
    #[error("the context id does not name a live context")]
    ContextInvalid,
    #[error("the kind value is not a known tracing kind")]
    KindNotFound,
    #[error("the operation is not a member of the kind")]
    OperationNotFound,
    #[error("a service of this kind is already configured in this context")]
    ServiceAlreadyConfigured,
    #[error("the buffer id does not name a live buffer of this context")]
    BufferNotFound,
    #[error("an argument is null or out of range")]
    InvalidArgument,
    #[error("all context (or buffer) slots are in use")]
    OutOfResources,
    #[error("the context is started; stop it first")]
    ContextActive,
    #[error("not allowed from inside a callback of this context or buffer")]
    Busy,
    #[error("the kind has no operation table or argument descriptors")]
    NotAvailable,
    #[error("the external correlation id stack is empty")]
    StackEmpty,
}

impl ServiceError {
    /// The `offtrace_status_t` value (0 is `OFFTRACE_STATUS_SUCCESS`).
    pub fn code(self) -> i32 {
        match self {
            ServiceError::Unknown => 1,
            ServiceError::ContextInvalid => 2,
            ServiceError::KindNotFound => 3,
            ServiceError::OperationNotFound => 4,
            ServiceError::ServiceAlreadyConfigured => 5,
            ServiceError::BufferNotFound => 6,
            ServiceError::InvalidArgument => 7,
            ServiceError::OutOfResources => 8,
            ServiceError::ContextActive => 9,
            ServiceError::Busy => 10,
            ServiceError::NotAvailable => 11,
            ServiceError::StackEmpty => 12,
        }
    }
}
