//! The agent's recording: the trace file, written by `offtrace-recorder` (per-thread rings, the
//! writer thread), which the agent subscribes to the tracing services. The SYCL/UR backend
//! (`services_bridge`) emits typed records into the services; the recorder writes them. The raw
//! layer — every XPTI notification exactly as the runtime sent it — is the backend's
//! [`crate::raw_layer::XptiRawLayer`], off unless asked for (`OFFTRACE_RAW=1`, or
//! `OFFTRACE_DETAIL=verbose`; `offtrace record --raw`): nothing downstream needs it.
//!
//! Start: the first `xptiTraceInit` (`lib.rs`). Finish: the last `xptiTraceFinish`, else the
//! agent's ELF destructor; an `atexit` handler only asks the writer for a cycle.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use offtrace_core::ContextId;
use offtrace_format::Record;

use crate::config::Config;
use crate::dispatcher::Dispatcher;
use crate::interner::Interner;

/// What the backend needs of the recording.
#[derive(Debug)]
pub struct Recorder {
    pub dispatcher: Dispatcher,
    /// The raw layer's definition tables, over the recording's string table.
    pub interner: Interner,
    pub config: Config,
    context: OnceLock<ContextId>,
}

static RECORDER: OnceLock<Recorder> = OnceLock::new();
static FINISHED: AtomicBool = AtomicBool::new(false);

/// The recording, once started.
pub fn get() -> Option<&'static Recorder> {
    RECORDER.get()
}

/// Whether the recording runs.
pub fn is_recording() -> bool {
    offtrace_recorder::is_recording()
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map(|s| s.trim().to_owned()).unwrap_or_default()
}

/// Starts recording into `config.output` (or `<output>.<pid>` when that trace exists:
/// `offtrace_recorder::claim_output`); `None` when tracing is off.
#[cold]
pub fn start(dispatcher: Dispatcher, dispatcher_path: &str, config: Config) -> Option<&'static Recorder> {
    if let Some(r) = RECORDER.get() {
        return Some(r);
    }
    let mut config = config;
    let file = match offtrace_recorder::claim_output(&config.output) {
        Ok((f, path)) => {
            config.output = path;
            f
        }
        Err(e) => {
            eprintln!("offtrace: cannot create {}: {e}; tracing off", config.output.display());
            return None;
        }
    };
    let cmdline = std::fs::read("/proc/self/cmdline").unwrap_or_default();
    let command: Vec<String> =
        cmdline.split(|&b| b == 0).filter(|s| !s.is_empty()).map(|s| String::from_utf8_lossy(s).into_owned()).collect();
    let info = [
        ("pid", std::process::id().to_string()),
        ("command", command.join(" ")),
        ("agent_version", env!("CARGO_PKG_VERSION").to_owned()),
        ("dispatcher", dispatcher_path.to_owned()),
        ("detail", config.detail_name().to_owned()),
        ("hostname", hostname()),
        ("ring_words", config.ring_words.to_string()),
        ("lossless", config.lossless.to_string()),
        ("raw_layer", config.raw.to_string()),
        ("output", config.output.display().to_string()),
    ];
    let info: Vec<(&str, &str)> = info.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let rc = offtrace_recorder::Config::default()
        .with_ring_words(config.ring_words)
        .with_lossless(config.lossless)
        .with_crash_flush(offtrace_recorder::crash_flush_wanted());
    if let Err(e) = offtrace_recorder::start_open(rc, file, &info) {
        eprintln!("offtrace: {e}; tracing off");
        return None;
    }
    let defs = offtrace_recorder::definitions()?;
    let raw = config.raw;
    let rec = RECORDER.get_or_init(|| Recorder {
        dispatcher,
        interner: Interner::with_definitions(defs),
        config,
        context: OnceLock::new(),
    });
    if raw {
        offtrace_recorder::set_raw_layer(Box::new(crate::raw_layer::XptiRawLayer::new(&rec.dispatcher, &rec.interner)));
    }
    // A forked child has no writer thread: it stops recording.
    // SAFETY: registering a plain extern "C" fn with no captured state.
    #[allow(unsafe_code)]
    unsafe {
        libc::pthread_atfork(None, None, Some(stop_in_child));
    }
    match offtrace_recorder::subscribe(raw) {
        Ok(ctx) => {
            let _ = rec.context.set(ctx);
        }
        Err(e) => {
            eprintln!("offtrace: cannot subscribe the recorder to the tracing services: {e}; tracing off");
            let _ = offtrace_recorder::finish();
            return None;
        }
    }
    // The typed kinds come from the bridge: switch it on.
    crate::services_bridge::set_active(true);
    crate::metrics::start_from_env();
    Some(rec)
}

extern "C" fn stop_in_child() {
    offtrace_recorder::stop_in_child();
}

/// Stops recording and writes the end of the trace. Idempotent.
#[cold]
pub fn finish() {
    if FINISHED.swap(true, Ordering::AcqRel) {
        return;
    }
    // The samplers' last samples go in before the recorder stops.
    crate::metrics::stop();
    if let Some(ctx) = RECORDER.get().and_then(|r| r.context.get()) {
        // Stop first: no record is delivered once it returns.
        let _ = offtrace_core::stop_context(*ctx);
    }
    if let Err(e) = offtrace_recorder::finish()
        && !matches!(e, offtrace_recorder::FinishError::NotRecording)
    {
        eprintln!("offtrace: {e}");
    }
}

/// Asks the writer to drain everything and close a chunk now, and waits for it (at most 1 s).
#[cold]
pub fn flush_now() {
    offtrace_recorder::flush(std::time::Duration::from_secs(1));
}

/// Entries dropped so far (full rings).
pub fn total_drops() -> u64 {
    offtrace_recorder::total_drops()
}

/// Queues a definition-like record (streams) for the trace.
pub fn push_definition(r: Record) {
    if let Some(d) = offtrace_recorder::definitions() {
        d.push(r);
    }
}
