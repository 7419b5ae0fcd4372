//! The Unified Runtime API description (function ids, names, parameters), generated from `ur_api.h`.
