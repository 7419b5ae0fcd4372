//! The C API of the tracing services.
