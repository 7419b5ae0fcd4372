//! Command-line syntax (clap). Parsed arguments become plain config structs here; nothing past
//! this file sees a clap type.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "offtrace",
    version,
    about = "Trace and profile accelerator runtimes: SYCL / Unified Runtime, OpenCL, CUDA"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a program with offtrace's backends loaded (SYCL, OpenCL, CUDA) and write a trace.
    Record(RecordArgs),
    /// Summarise a trace: API calls, device activity, memory, queues, task graph, threads, counters.
    Report(ReportArgs),
    /// Convert a trace to Perfetto, Chrome JSON, SQLite or CSV.
    Export(ExportArgs),
    /// Metric groups and metrics of this machine (`metrics list`).
    Metrics(crate::cli_metrics::MetricsArgs),
    /// A live view of the device telemetry and chosen metric groups, refreshed every interval.
    Monitor(crate::cli_metrics::MonitorArgs),
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum Detail {
    Basic,
    Normal,
    Verbose,
}

#[derive(Debug, Args)]
pub struct RecordArgs {
    /// Trace file to write [default: offtrace-<program>-<n>.offtrace, never overwriting].
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Metadata detail the runtime sends (the XPTI detail level).
    #[arg(long, value_enum, default_value_t = Detail::Normal)]
    pub detail: Detail,
    /// Record Unified Runtime calls (sets UR_ENABLE_LAYERS=UR_LAYER_TRACING).
    #[arg(long, overrides_with = "no_ur_calls")]
    pub ur_calls: bool,
    /// Do not record Unified Runtime calls. The SYCL backend then sees only the SYCL runtime's
    /// own notifications: no copies, fills or barriers, no queue of any command, no allocation
    /// sizes, and kernels named by the submitting function (e.g. dpctl's); use it only to
    /// measure the runtime without its UR layer.
    #[arg(long = "no-ur-calls", overrides_with = "ur_calls")]
    pub no_ur_calls: bool,
    /// Subscribe the debug streams (sycl.debug, ur.call.debug) instead of the normal ones.
    #[arg(long)]
    pub debug_streams: bool,
    /// Also record the raw layer: every XPTI notification as the runtime sent it (sets
    /// OFFTRACE_RAW=1) [default: with --detail verbose only].
    #[arg(long)]
    pub raw: bool,
    /// Never drop a record: a program thread whose trace buffer is full waits until offtrace's
    /// writer has room (sets OFFTRACE_LOSSLESS=1 for every backend). Without it such a record is
    /// dropped and counted instead (the summary and the report say how many), so that tracing
    /// never makes the program wait.
    #[arg(long)]
    pub lossless: bool,
    /// The SYCL runtime: a venv or a lib directory holding libsycl.so.9 and libxptifw.so.1.
    #[arg(long, value_name = "DIR")]
    pub runtime: Option<PathBuf>,
    /// Also make the SYCL runtime's OpenCL CPU runtime (<runtime lib>/libintelocl.so) visible,
    /// as the venv's etc/OpenCL/vendors intends: sets OCL_ICD_FILENAMES and OCL_ICD_VENDORS
    /// where they are not set. The program may then select another device than without
    /// offtrace. Without it the program sees the OpenCL devices it sees without offtrace.
    #[arg(long)]
    pub intel_opencl: bool,
    /// XPTI dispatcher: `offtrace` (offtrace's libxptifw.so, next to this executable), `intel`
    /// (the runtime's own) or a path [default: offtrace when it is built, else intel].
    #[arg(long, value_name = "offtrace|intel|PATH")]
    pub dispatcher: Option<String>,
    /// How offtrace's OpenCL layer gets into an OpenCL program. `layer`: the ICD loader loads it
    /// (OPENCL_LAYERS; the Khronos loader, ocl-icd 2.3.0 and later). `preload`: LD_PRELOAD, for
    /// ICD loaders without layer support (CUDA's libOpenCL.so.1, older ocl-icd). `auto`: preload
    /// when the libOpenCL.so.1 the program would load has no layer support, else layer; preload
    /// mode is said in one line after the summary. See docs/opencl.md.
    #[arg(long, value_enum, default_value_t = OpenclInterposeArg::Auto, value_name = "MODE")]
    pub opencl_interpose: OpenclInterposeArg,
    /// The agent library [default: $OFFTRACE_AGENT, else libofftrace_agent.so next to offtrace].
    #[arg(long, value_name = "PATH")]
    pub agent: Option<PathBuf>,
    /// A tracing-services tool library to load into the program (repeatable; sets
    /// OFFTRACE_TOOLS). See docs/services.md.
    #[arg(long = "tool", value_name = "LIB")]
    pub tools: Vec<PathBuf>,
    #[command(flatten)]
    pub metrics: crate::cli_metrics::RecordMetricsArgs,
    /// The program and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub program: Vec<OsString>,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum OpenclInterposeArg {
    Auto,
    Layer,
    Preload,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum ReportFormat {
    Text,
    Json,
    Csv,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The trace file.
    pub file: PathBuf,
    #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
    pub format: ReportFormat,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum ExportFormatArg {
    Perfetto,
    Chrome,
    Sqlite,
    Csv,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The trace file.
    pub file: PathBuf,
    #[arg(long, value_enum)]
    pub format: ExportFormatArg,
    /// Output file (a directory for csv).
    #[arg(short, long, value_name = "OUT")]
    pub output: PathBuf,
}

// ---- plain configs ---------------------------------------------------------------------------

#[derive(Debug, Clone)]
pub enum DispatcherChoice {
    /// offtrace's when it is built next to the executable, else Intel's (with a note).
    Default,
    Intel,
    Offtrace,
    Path(PathBuf),
}

#[derive(Debug, Clone)]
pub struct RecordConfig {
    pub output: Option<PathBuf>,
    pub detail: &'static str,
    pub ur_calls: bool,
    pub debug_streams: bool,
    pub raw: bool,
    /// `--lossless`: OFFTRACE_LOSSLESS=1.
    pub lossless: bool,
    pub runtime: Option<PathBuf>,
    /// `--intel-opencl`: add the runtime's OpenCL CPU runtime to the ICD loaders' list.
    pub intel_opencl: bool,
    pub dispatcher: DispatcherChoice,
    pub opencl_interpose: crate::opencl_loader::Interpose,
    pub agent: Option<PathBuf>,
    pub tools: Vec<PathBuf>,
    pub metrics: crate::metrics_cmd::RecordMetrics,
    pub program: Vec<OsString>,
}

impl RecordArgs {
    pub fn into_config(self) -> anyhow::Result<RecordConfig> {
        let dispatcher = match self.dispatcher.as_deref() {
            None => DispatcherChoice::Default,
            Some("intel") => DispatcherChoice::Intel,
            Some("offtrace") => DispatcherChoice::Offtrace,
            Some(p) => DispatcherChoice::Path(PathBuf::from(p)),
        };
        Ok(RecordConfig {
            output: self.output,
            detail: match self.detail {
                Detail::Basic => "basic",
                Detail::Normal => "normal",
                Detail::Verbose => "verbose",
            },
            ur_calls: !self.no_ur_calls,
            debug_streams: self.debug_streams,
            raw: self.raw,
            lossless: self.lossless,
            runtime: self.runtime,
            intel_opencl: self.intel_opencl,
            dispatcher,
            opencl_interpose: match self.opencl_interpose {
                OpenclInterposeArg::Auto => crate::opencl_loader::Interpose::Auto,
                OpenclInterposeArg::Layer => crate::opencl_loader::Interpose::Layer,
                OpenclInterposeArg::Preload => crate::opencl_loader::Interpose::Preload,
            },
            agent: self.agent,
            tools: self.tools,
            metrics: self.metrics.into_config(),
            program: self.program,
        })
    }
}

#[derive(Debug, Clone)]
pub struct ReportConfig {
    pub file: PathBuf,
    pub format: ReportFormat,
}

impl ReportArgs {
    pub fn into_config(self) -> ReportConfig {
        ReportConfig { file: self.file, format: self.format }
    }
}

#[derive(Debug, Clone)]
pub struct ExportConfig {
    pub file: PathBuf,
    pub format: offtrace_export::ExportFormat,
    pub output: PathBuf,
}

impl ExportArgs {
    pub fn into_config(self) -> ExportConfig {
        use offtrace_export::ExportFormat as F;
        ExportConfig {
            file: self.file,
            format: match self.format {
                ExportFormatArg::Perfetto => F::Perfetto,
                ExportFormatArg::Chrome => F::Chrome,
                ExportFormatArg::Sqlite => F::Sqlite,
                ExportFormatArg::Csv => F::Csv,
            },
            output: self.output,
        }
    }
}
