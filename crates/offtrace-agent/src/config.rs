//! The agent's configuration, read once from the environment (set by `offtrace record`).
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `OFFTRACE_OUTPUT` | trace file path (`%p` = pid; when the file exists already, e.g. written by a parent or an earlier traced program, `<path>.<pid>`: `offtrace_recorder::claim_output`) | `offtrace-<pid>.offtrace` in the cwd |
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

fn flag(var: &impl Fn(&str) -> Option<String>, name: &str, default: bool) -> bool {
    match var(name) {
        Some(v) => matches!(v.trim(), "1" | "true" | "yes" | "on"),
        None => default,
    }
}

impl Config {
    #[cold]
    pub fn from_env() -> Self {
        let output = std::env::var_os("OFFTRACE_OUTPUT")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(format!("offtrace-{}.offtrace", std::process::id())));
        Self::from_vars(output, |name| std::env::var(name).ok())
    }

    /// The configuration from variables looked up by `var` (the environment in
    /// [`Self::from_env`]), the output path aside.
    fn from_vars(output: PathBuf, var: impl Fn(&str) -> Option<String>) -> Self {
        let detail = match var("OFFTRACE_DETAIL").as_deref().map(str::trim) {
            Some("basic") => detail_level::BASIC,
            Some("verbose") => detail_level::VERBOSE,
            _ => detail_level::NORMAL,
        };
        let ring_records = var("OFFTRACE_BUFFER_RECORDS")
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|&n| n >= 2)
            .unwrap_or(1 << 16)
            .min(1 << 22);
        Self {
            output,
            detail,
            ur_calls: flag(&var, "OFFTRACE_UR_CALLS", true),
            debug_streams: flag(&var, "OFFTRACE_DEBUG_STREAMS", false),
            ring_words: ring_records * 16,
            lossless: flag(&var, "OFFTRACE_LOSSLESS", false),
            // The raw layer doubles the agent's work per notification (its decode and encode):
            // on only when asked for, explicitly or with the most detailed level.
            raw: flag(&var, "OFFTRACE_RAW", detail == detail_level::VERBOSE),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn config(vars: &[(&str, &str)]) -> Config {
        let vars: Vec<(String, String)> = vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        Config::from_vars(PathBuf::from("t.offtrace"), |name| {
            vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn the_raw_layer_is_off_unless_asked_for_or_verbose() {
        assert!(!config(&[]).raw);
        assert!(!config(&[("OFFTRACE_DETAIL", "normal")]).raw);
        assert!(config(&[("OFFTRACE_RAW", "1")]).raw);
        assert!(config(&[("OFFTRACE_DETAIL", "verbose")]).raw);
        assert!(!config(&[("OFFTRACE_DETAIL", "verbose"), ("OFFTRACE_RAW", "0")]).raw);
        assert!(config(&[("OFFTRACE_DETAIL", "basic"), ("OFFTRACE_RAW", "on")]).raw);
    }

    #[test]
    fn defaults_and_limits() {
        let c = config(&[]);
        assert!(c.ur_calls && !c.debug_streams && !c.lossless);
        assert_eq!(c.detail, detail_level::NORMAL);
        assert_eq!(c.ring_words, (1 << 16) * 16);
        assert_eq!(config(&[("OFFTRACE_BUFFER_RECORDS", "1")]).ring_words, (1 << 16) * 16, "below 2: default");
        assert_eq!(config(&[("OFFTRACE_BUFFER_RECORDS", "2")]).ring_words, 2 * 16);
        assert_eq!(config(&[("OFFTRACE_BUFFER_RECORDS", "99999999")]).ring_words, (1 << 22) * 16);
    }
}
