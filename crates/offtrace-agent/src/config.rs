//! The agent's configuration, read once from the environment (set by `offtrace record`).
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `OFFTRACE_OUTPUT` | trace file path (`%p` = pid; if another live traced process holds the file, e.g. a child that inherited the variable, `<path>.<pid>`) | `offtrace-<pid>.offtrace` in the cwd |
//! | `OFFTRACE_DETAIL` | `basic` / `normal` / `verbose`: the answer to the detail-level query | `normal` |
//! | `OFFTRACE_UR_CALLS` | `1` / `0`: subscribe `ur.call` | `1` |
//! | `OFFTRACE_DEBUG_STREAMS` | `1`: also subscribe `sycl.debug` and `ur.call.debug` (the runtime then sends there *instead*) | `0` |
//! | `OFFTRACE_BUFFER_RECORDS` | per-thread ring capacity in records of 16 words (128 bytes), rounded up to a power of two: a typed UR call takes ~6 + its argument count words, a raw notification ~10-15 | `65536` (8 MiB per thread) |
//! | `OFFTRACE_LOSSLESS` | `1`: never drop; a thread whose ring is full waits for the writer | `0` (drop and count) |
//! | `OFFTRACE_RAW` | `1` / `0`: keep the raw layer (every XPTI notification as sent) beside the typed records; nothing downstream needs it, it is there to compare with the runtime's stream | `1` with `OFFTRACE_DETAIL=verbose`, else `0` |

use std::path::PathBuf;

use offtrace_xpti::abi::detail_level;

#[derive(Debug, Clone)]
pub struct Config {
    pub output: PathBuf,
    pub detail: u8,
    pub ur_calls: bool,
    pub debug_streams: bool,
    /// Words per thread ring (`OFFTRACE_BUFFER_RECORDS` × 16).
    pub ring_words: usize,
    pub lossless: bool,
    pub raw: bool,
}

fn flag(name: &str, default: bool) -> bool {
    match std::env::var(name) {
        Ok(v) => matches!(v.trim(), "1" | "true" | "yes" | "on"),
        Err(_) => default,
    }
}

impl Config {
    #[cold]
    pub fn from_env() -> Self {
        let output = std::env::var_os("OFFTRACE_OUTPUT")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(format!("offtrace-{}.offtrace", std::process::id())));
        let detail = match std::env::var("OFFTRACE_DETAIL").as_deref().map(str::trim) {
            Ok("basic") => detail_level::BASIC,
            Ok("verbose") => detail_level::VERBOSE,
            _ => detail_level::NORMAL,
        };
        let ring_records = std::env::var("OFFTRACE_BUFFER_RECORDS")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|&n| n >= 2)
            .unwrap_or(1 << 16)
            .min(1 << 22);
        Self {
            output,
            detail,
            ur_calls: flag("OFFTRACE_UR_CALLS", true),
            debug_streams: flag("OFFTRACE_DEBUG_STREAMS", false),
            ring_words: ring_records * 16,
            lossless: flag("OFFTRACE_LOSSLESS", false),
            // The raw layer doubles the agent's work per notification (its decode and encode):
            // on only when asked for, explicitly or with the most detailed level.
            raw: flag("OFFTRACE_RAW", detail == detail_level::VERBOSE),
        }
    }

    pub fn detail_name(&self) -> &'static str {
        match self.detail {
            detail_level::BASIC => "basic",
            detail_level::VERBOSE => "verbose",
            _ => "normal",
        }
    }
}
