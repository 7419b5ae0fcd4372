//! Result codes: the Level Zero `ze_result_t` values of the seed's tools chapter (same numbers),
//! so a C caller can compare them with `ZE_RESULT_*` directly.
//!
//! Misuse named by the seed and the code it gets here (the seed says "the call would fail" for a
//! domain conflict without naming a code; `ZE_RESULT_ERROR_NOT_AVAILABLE` is its Tools code for
//! "resource already in use and simultaneous access not allowed", which is what a domain is):
//!
//! | misuse | code |
//! |---|---|
//! | activating two groups of one domain on a device | `NOT_AVAILABLE` |
//! | opening a streamer on a group that is not time-based | `INVALID_ARGUMENT` |
//! | creating a query pool on a group that is not event-based | `INVALID_ARGUMENT` |
//! | opening a streamer / query pool on a group that is not activated | `INVALID_ARGUMENT` |
//! | a second streamer on one device | `NOT_AVAILABLE` |
//! | reading (or closing) a closed streamer, any stale handle | `INVALID_NULL_HANDLE` |
//! | deactivating a group with an open streamer or query pool | `HANDLE_OBJECT_IN_USE` |
//! | query data before its end | `NOT_READY` |

/// A Level Zero result code (`ze_result_t`), minus success.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
#[repr(u32)]
pub enum MetricsError {
    #[error("not ready (ZE_RESULT_NOT_READY)")]
    NotReady = 1,
    #[error("device lost (ZE_RESULT_ERROR_DEVICE_LOST)")]
    DeviceLost = 0x7000_0001,
    #[error("insufficient permissions (ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS)")]
    InsufficientPermissions = 0x7001_0000,
    #[error("resource already in use, simultaneous access not allowed (ZE_RESULT_ERROR_NOT_AVAILABLE)")]
    NotAvailable = 0x7001_0001,
    #[error("not initialised (ZE_RESULT_ERROR_UNINITIALIZED)")]
    Uninitialized = 0x7800_0001,
    #[error("unsupported feature (ZE_RESULT_ERROR_UNSUPPORTED_FEATURE)")]
    UnsupportedFeature = 0x7800_0003,
    #[error("invalid argument (ZE_RESULT_ERROR_INVALID_ARGUMENT)")]
    InvalidArgument = 0x7800_0004,
    #[error("invalid handle (ZE_RESULT_ERROR_INVALID_NULL_HANDLE)")]
    InvalidNullHandle = 0x7800_0005,
    #[error("object still in use (ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE)")]
    HandleObjectInUse = 0x7800_0006,
    #[error("null pointer (ZE_RESULT_ERROR_INVALID_NULL_POINTER)")]
    InvalidNullPointer = 0x7800_0007,
    #[error("invalid size (ZE_RESULT_ERROR_INVALID_SIZE)")]
    InvalidSize = 0x7800_0008,
    #[error("unknown error (ZE_RESULT_ERROR_UNKNOWN)")]
    Unknown = 0x7fff_ffff,
}

impl MetricsError {
    /// The `ze_result_t` value.
    pub fn code(self) -> u32 {
        self as u32
    }
}

/// `ZE_RESULT_SUCCESS`.
pub const SUCCESS: u32 = 0;
