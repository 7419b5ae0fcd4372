//! `offtrace record`: find the runtime, the agent and the dispatcher, run the program with the
//! XPTI environment set, forward signals, then check and summarise the trace.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use offtrace_format::{Batch, ReadOptions, Record, TraceReader, TraceRecords};

use crate::cli::{DispatcherChoice, RecordConfig};
use crate::{format, signals};

const SYCL_LIB: &str = "libsycl.so.9";
const XPTIFW_LIB: &str = "libxptifw.so.1";
const AGENT_LIB: &str = "libofftrace_agent.so";
const OPENCL_LAYER_LIB: &str = "libofftrace_opencl.so";

/// The directory holding this executable (where the agent and dispatcher are built).
fn exe_dir() -> Option<PathBuf> {
    std::env::current_exe().ok()?.canonicalize().ok()?.parent().map(Path::to_path_buf)
}

/// The lib directory of a runtime given as a venv or a lib directory, if it holds the runtime.
fn runtime_lib(dir: &Path) -> Option<PathBuf> {
    [dir.join("lib"), dir.to_path_buf()].into_iter().find(|d| d.join(SYCL_LIB).exists() && d.join(XPTIFW_LIB).exists())
}

/// The SYCL runtime: `--runtime`, `$OFFTRACE_SYCL_RUNTIME`, the venv the program runs from
/// (`<venv>/bin/python`: the runtime it will load), the project's venv, `./.venv`.
pub(crate) fn find_runtime(explicit: Option<&Path>, program: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(dir) = explicit {
        return runtime_lib(dir).with_context(|| {
            format!(
                "no SYCL runtime in {}: it holds no {SYCL_LIB} and {XPTIFW_LIB} (itself or in lib/); pass --runtime DIR or run scripts/setup-sycl.sh",
                dir.display()
            )
        });
    }
    if let Some(dir) = std::env::var_os("OFFTRACE_SYCL_RUNTIME") {
        let dir = PathBuf::from(dir);
        return runtime_lib(&dir).with_context(|| {
            format!(
                "no SYCL runtime in {} (from OFFTRACE_SYCL_RUNTIME): pass --runtime DIR or run scripts/setup-sycl.sh",
                dir.display()
            )
        });
    }
    let mut candidates = Vec::new();
    // A venv's interpreter (or any program in a venv's bin/): without this, a program run from a
    // venv other than the project's was traced as an OpenCL-only program, without the SYCL
    // runtime's environment (dpctl then fails: "USM allocation failed").
    if let Some(venv) = program.and_then(Path::parent).filter(|b| b.ends_with("bin")).and_then(Path::parent) {
        candidates.push(venv.to_path_buf());
    }
    if let Some(d) = exe_dir() {
        candidates.push(d.join("../../.venv"));
    }
    candidates.push(PathBuf::from(".venv"));
    // A build outside the workspace's target/ (CARGO_TARGET_DIR) still finds the workspace's venv.
    candidates.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv"));
    for c in candidates {
        if let Some(lib) = runtime_lib(&c) {
            return Ok(lib.canonicalize().unwrap_or(lib));
        }
    }
    bail!("no SYCL runtime found: pass --runtime DIR or run scripts/setup-sycl.sh")
}

fn find_agent(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    let (path, from) = match (explicit, std::env::var_os("OFFTRACE_AGENT")) {
        (Some(p), _) => (p.to_path_buf(), "--agent"),
        (None, Some(p)) => (PathBuf::from(p), "OFFTRACE_AGENT"),
        (None, None) => (exe_dir().unwrap_or_default().join(AGENT_LIB), "next to offtrace"),
    };
    if !path.is_file() {
        bail!(
            "agent not found: {} ({from}): build it with `cargo build -p offtrace-agent` (it lands next to the offtrace binary) or pass --agent PATH",
            path.display()
        );
    }
    Ok(path.canonicalize().unwrap_or(path))
}

fn find_dispatcher(choice: &DispatcherChoice, lib: &Path) -> anyhow::Result<PathBuf> {
    let ours = || {
        let d = exe_dir().unwrap_or_default();
        let p = d.join(XPTIFW_LIB);
        if p.exists() { p } else { d.join("libxptifw.so") }
    };
    let path = match choice {
        DispatcherChoice::Intel => lib.join(XPTIFW_LIB),
        DispatcherChoice::Offtrace => ours(),
        DispatcherChoice::Default => {
            let p = ours();
            if p.is_file() {
                p
            } else {
                eprintln!(
                    "offtrace: note: offtrace's XPTI dispatcher is not built ({}); using the runtime's own (build it with `cargo build -p offtrace-xptifw`)",
                    p.display()
                );
                lib.join(XPTIFW_LIB)
            }
        }
        DispatcherChoice::Path(p) => p.clone(),
    };
    if !path.is_file() {
        bail!(
            "XPTI dispatcher not found: {}: build offtrace's with `cargo build -p offtrace-xptifw`, or pass --dispatcher intel|PATH",
            path.display()
        );
    }
    Ok(path.canonicalize().unwrap_or(path))
}

/// The program as `execvp` would find it.
pub(crate) fn find_program(program: &OsStr) -> anyhow::Result<PathBuf> {
    let p = Path::new(program);
    let found = if p.components().count() > 1 {
        p.is_file().then(|| p.to_path_buf())
    } else {
        std::env::var_os("PATH")
            .and_then(|paths| std::env::split_paths(&paths).map(|d| d.join(p)).find(|c| is_executable(c)))
    };
    found.with_context(|| format!("program not found: {}", p.display()))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata().map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false)
}

/// `offtrace-<program>-<n>.offtrace`, the first that does not exist yet (nor its siblings).
fn default_output(program: &OsStr) -> PathBuf {
    let stem =
        Path::new(program).file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "program".into());
    let stem: String =
        stem.chars().map(|c| if c.is_alphanumeric() || c == '-' || c == '_' || c == '.' { c } else { '_' }).collect();
    (1u32..)
        .map(|n| PathBuf::from(format!("offtrace-{stem}-{n}.offtrace")))
        .find(|p| !p.exists() && crate::traces::siblings(p).is_empty())
        .unwrap_or_else(|| PathBuf::from(format!("offtrace-{stem}.offtrace")))
}

/// Fails early if the trace could not be written (the agent would only find out inside the
/// program). Leaves no file behind that was not there before.
fn check_writable(path: &Path) -> anyhow::Result<PathBuf> {
    let existed = path.exists();
    if path.is_dir() {
        bail!("cannot write the trace to {}: it is a directory; pass -o FILE", path.display());
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .with_context(|| format!("cannot write the trace to {}: choose another -o FILE", path.display()))?;
    let abs = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    if !existed {
        let _ = std::fs::remove_file(path);
    }
    Ok(abs)
}

/// `OFFTRACE_TOOLS` for `--tool` libraries: absolute paths, comma-separated (None: no tools).
pub fn tools_env(tools: &[PathBuf]) -> anyhow::Result<Option<OsString>> {
    let mut v = OsString::new();
    for (i, t) in tools.iter().enumerate() {
        if !t.is_file() {
            bail!("--tool {}: no such file", t.display());
        }
        let abs = t.canonicalize().with_context(|| format!("--tool {}", t.display()))?;
        let text = abs.to_str().with_context(|| format!("--tool {}: path is not UTF-8", abs.display()))?;
        if text.contains(',') {
            bail!("--tool {}: path contains ',', the OFFTRACE_TOOLS separator", abs.display());
        }
        if i > 0 {
            v.push(",");
        }
        v.push(text);
    }
    Ok((!tools.is_empty()).then_some(v))
}

pub fn run(cfg: RecordConfig) -> anyhow::Result<u8> {
    let Some(program) = cfg.program.first() else { bail!("no program given: offtrace record -- CMD [ARGS...]") };
    let program_path = find_program(program)?;
    let tools = tools_env(&cfg.tools)?;
    let mut output = cfg.output.clone().unwrap_or_else(|| default_output(program));
    if output.symlink_metadata().is_ok_and(|m| m.file_type().is_symlink()) {
        // A link to the trace: the trace it names is replaced, the link kept.
        output = output.canonicalize().unwrap_or(output);
    }
    if cfg.output.is_some() {
        // Every traced process keeps its trace (the path exists: `<path>.<pid>`), so an earlier
        // recording's files go first; listed afterwards are this recording's alone.
        crate::traces::clear_earlier(&output)?;
    }
    let output_abs = check_writable(&output)?;
    let mut cmd = Command::new(&program_path);
    cmd.args(&cfg.program[1..]);
    if let Some(t) = &tools {
        cmd.env("OFFTRACE_TOOLS", t);
    }
    crate::metrics_cmd::record_env(&mut cmd, &cfg.metrics)?;
    // Every backend reads it, so it is set before the SYCL runtime decides which run: an OpenCL or
    // CUDA program without a SYCL runtime used to drop records under `--lossless`.
    if cfg.lossless {
        cmd.env("OFFTRACE_LOSSLESS", "1");
    }
    // CUDA programs: the CUPTI injection, when built.
    let cuda = cuda_env(&mut cmd);
    let opencl_layer = find_opencl_layer();
    let mut interpose = crate::opencl_loader::choose(cfg.opencl_interpose, &program_path);
    interpose.hold_back_for_tools(&program_path, tools.is_some(), cuda);
    let lib = match find_runtime(cfg.runtime.as_deref(), Some(&program_path)) {
        Ok(lib) => lib,
        Err(e) if cfg.intel_opencl => {
            return Err(e.context("--intel-opencl adds the SYCL runtime's OpenCL CPU runtime: it needs that runtime"));
        }
        // No SYCL runtime: a program that uses OpenCL and/or CUDA alone is traced through the
        // OpenCL layer and/or the CUDA injection.
        Err(_) if cfg.runtime.is_none() && (opencl_layer.is_some() || cuda) => {
            cmd.env("OFFTRACE_OUTPUT", &output_abs).env("OFFTRACE_DETAIL", cfg.detail);
            if let Some(layer) = &opencl_layer {
                opencl_environment(&mut cmd, layer, &interpose);
                if cuda {
                    // Both backends in one process: each writes its own trace.
                    cmd.env("OFFTRACE_CUDA_OUTPUT", cuda_output(&output_abs));
                }
            }
            let opencl = opencl_layer.is_some().then_some(&interpose);
            let code = spawn_and_summarize(cmd, &program_path, &output_abs, &output, opencl)?;
            if code != NOT_STARTED {
                nothing_recorded_hint(&output_abs, opencl.is_some_and(|c| c.preload));
            }
            return Ok(code);
        }
        Err(e) if cfg.runtime.is_none() => {
            return Err(e.context(format!(
                "nothing to trace with: no SYCL runtime, no OpenCL layer ({OPENCL_LAYER_LIB} next to offtrace, or OFFTRACE_OPENCL_LAYER) \
                 and no CUDA injection (libofftrace_cuda.so next to offtrace, or OFFTRACE_CUDA_AGENT): build them with \
                 `cargo build -p offtrace-opencl -p offtrace-cuda`"
            )));
        }
        Err(e) => return Err(e),
    };
    let agent = find_agent(cfg.agent.as_deref())?;
    let dispatcher = find_dispatcher(&cfg.dispatcher, &lib)?;
    if cuda {
        // Both runtimes in one process: each backend writes its own trace.
        cmd.env("OFFTRACE_CUDA_OUTPUT", cuda_output(&output_abs));
    }
    // No LD_LIBRARY_PATH: nothing offtrace loads needs it (the agent, the dispatcher and the
    // layer are loaded by full path and need only libc, libgcc_s and libstdc++; the runtime's
    // libraries find each other through their `$ORIGIN` RUNPATH), and for the program it
    // changed which libraries it loads: a C program linked with `-lOpenCL` got the venv's
    // Khronos loader instead of the system's, PoCL the venv's hwloc (docs/cli.md).
    let intel_opencl = IntelOpencl::set_up(cfg.intel_opencl, &lib, &mut cmd)?;
    cmd.env("XPTI_TRACE_ENABLE", "1")
        .env("XPTI_FRAMEWORK_DISPATCHER", &dispatcher)
        .env("XPTI_SUBSCRIBERS", &agent)
        .env("OFFTRACE_OUTPUT", &output_abs)
        .env("OFFTRACE_DETAIL", cfg.detail)
        .env("OFFTRACE_UR_CALLS", if cfg.ur_calls { "1" } else { "0" })
        .env("OFFTRACE_DEBUG_STREAMS", if cfg.debug_streams { "1" } else { "0" });
    if cfg.raw {
        cmd.env("OFFTRACE_RAW", "1");
    }
    if cfg.ur_calls {
        let layers = match std::env::var("UR_ENABLE_LAYERS") {
            Ok(l) if !l.is_empty() && !l.contains("UR_LAYER_TRACING") => format!("{l};UR_LAYER_TRACING"),
            Ok(l) if !l.is_empty() => l,
            _ => "UR_LAYER_TRACING".to_owned(),
        };
        cmd.env("UR_ENABLE_LAYERS", layers);
    }
    // Device times of every SYCL command come from the OpenCL layer, hosted by the agent (one
    // copy of the services: OpenCL records carry the UR call's correlation). An agent built
    // without it gets no layer (a second copy would record nothing into this trace).
    let hosts_layer = hosts_opencl_layer(&agent);
    if hosts_layer {
        opencl_environment(&mut cmd, &agent, &interpose);
    }
    let code = spawn_and_summarize(cmd, &program_path, &output_abs, &output, hosts_layer.then_some(&interpose))?;
    let hinted = if code == NOT_STARTED { library_path_hint(&lib) } else { code != 0 && intel_opencl.hint(code) };
    // A program that did not start (127) recorded nothing for that reason alone.
    if !hinted && code != NOT_STARTED {
        nothing_recorded_hint(&output_abs, hosts_layer && interpose.preload);
    }
    drop(intel_opencl);
    Ok(code)
}

/// The exit status of a program the dynamic loader could not start (a library not found), and
/// a shell's for a command not found.
const NOT_STARTED: u8 = 127;

/// One line after the summary of a program that may not have started: `record` used to put the
/// runtime's lib folder first in `LD_LIBRARY_PATH`, so a SYCL binary linked without a RUNPATH
/// ran traced though it did not untraced. Not printed when the folder is on the path already.
/// Returns whether it printed.
fn library_path_hint(lib: &Path) -> bool {
    let on_path = std::env::var_os("LD_LIBRARY_PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d == lib));
    if on_path {
        return false;
    }
    eprintln!(
        "offtrace: hint: the program exited with status {NOT_STARTED}; if a library was not found (the loader's message above), \
         give it the LD_LIBRARY_PATH it needs without offtrace (record leaves it as it is), e.g. LD_LIBRARY_PATH={}",
        lib.display()
    );
    true
}

/// The SYCL runtime's OpenCL CPU runtime (`<lib>/libintelocl.so`, Intel's "CPU device") and the
/// program. The venv's `etc/OpenCL/vendors/intel-cpu.icd` is read by no ICD loader unless the
/// user points one at it (`OCL_ICD_VENDORS`, `OCL_ICD_FILENAMES`), so without offtrace a
/// program sees only `/etc/OpenCL/vendors`' platforms (PoCL on the development machine) and its default device is
/// chosen among those. `record` keeps it so by default: a program traced must select the device
/// it selects untraced. `--intel-opencl` adds the runtime as `record` did before.
enum IntelOpencl {
    /// `--intel-opencl`: `OCL_ICD_FILENAMES` set (unless the user had), and the vendors folder
    /// that the ocl-icd loaders read, held until the program exited (dropping removes it).
    Added { _vendors: Option<IcdVendors> },
    /// Not added though the runtime has it and the user set neither variable: named in a hint
    /// when the program fails.
    NotVisible(PathBuf),
    /// The user chose the loaders' list, or the runtime has no OpenCL CPU runtime.
    Untouched,
}

impl IntelOpencl {
    const LIB: &str = "libintelocl.so";

    fn set_up(add: bool, lib: &Path, cmd: &mut Command) -> anyhow::Result<Self> {
        let runtime = lib.join(Self::LIB);
        if add {
            if !runtime.is_file() {
                bail!(
                    "--intel-opencl: the SYCL runtime in {} has no {} (pip install intel-opencl-rt into its venv)",
                    lib.display(),
                    Self::LIB
                );
            }
            if !user_set("OCL_ICD_FILENAMES") {
                cmd.env("OCL_ICD_FILENAMES", &runtime);
            }
            let vendors = IcdVendors::with_runtime(&runtime);
            if let Some(v) = &vendors {
                cmd.env("OCL_ICD_VENDORS", &v.0);
            }
            return Ok(Self::Added { _vendors: vendors });
        }
        let user_chose = user_set("OCL_ICD_FILENAMES") || user_set("OCL_ICD_VENDORS");
        Ok(if user_chose || !runtime.is_file() { Self::Untouched } else { Self::NotVisible(runtime) })
    }

    /// One line after the summary of a failed run: the device the program did not see may be
    /// the one it expected (dpctl's USM allocations fail on PoCL, for one). Returns whether it
    /// printed.
    fn hint(&self, code: u8) -> bool {
        if let Self::NotVisible(runtime) = self {
            eprintln!(
                "offtrace: hint: the program exited with status {code}; the SYCL runtime's OpenCL CPU device was not visible to it, \
                 as without offtrace: `offtrace record --intel-opencl` adds it ({})",
                runtime.display()
            );
            return true;
        }
        false
    }
}

/// Whether the user set an ICD loader variable (the loaders take an empty one as unset).
fn user_set(var: &str) -> bool {
    std::env::var_os(var).is_some_and(|v| !v.is_empty())
}

/// `--intel-opencl`'s vendors folder for the OpenCL ICD loaders: the system's ICDs and the SYCL
/// runtime's OpenCL CPU runtime, removed on drop (after the program exited). The Khronos loader
/// (the SYCL venv's) reads `OCL_ICD_FILENAMES`; the ocl-icd that pyopencl bundles does not, and
/// finds Intel's runtime only through `OCL_ICD_VENDORS` (a folder that replaces
/// `/etc/OpenCL/vendors`, hence the system's ICDs beside it). Both loaders load an ICD named
/// twice once. Not made when the user set `OCL_ICD_VENDORS`, or when it cannot be written.
struct IcdVendors(PathBuf);

impl IcdVendors {
    const SYSTEM: &str = "/etc/OpenCL/vendors";

    fn with_runtime(runtime: &Path) -> Option<Self> {
        if user_set("OCL_ICD_VENDORS") {
            return None;
        }
        let tmp = std::env::temp_dir();
        remove_stale_vendor_folders(&tmp);
        let dir = tmp.join(format!("offtrace-icd-{}", std::process::id()));
        let made = Self(dir);
        std::fs::create_dir_all(&made.0).ok()?;
        for e in std::fs::read_dir(Self::SYSTEM).into_iter().flatten().flatten() {
            let name = e.file_name();
            if Path::new(&name).extension().is_some_and(|x| x == "icd") {
                std::fs::copy(e.path(), made.0.join(&name)).ok()?;
            }
        }
        let mut line = runtime.as_os_str().as_encoded_bytes().to_vec();
        line.push(b'\n');
        std::fs::write(made.0.join("offtrace-sycl-runtime.icd"), line).ok()?;
        Some(made)
    }
}

/// Removes the vendors folders (`offtrace-icd-<pid>`) that an `offtrace record` killed before
/// it could drop them left in `tmp` (SIGKILL: other signals are forwarded and the folder goes
/// with the run): those whose process no longer exists.
fn remove_stale_vendor_folders(tmp: &Path) {
    for e in std::fs::read_dir(tmp).into_iter().flatten().flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix("offtrace-icd-")).and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new("/proc").join(pid.to_string()).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

impl Drop for IcdVendors {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Where the CUDA backend writes when another backend writes `output_abs`.
fn cuda_output(output_abs: &Path) -> std::ffi::OsString {
    let mut cuda_out = output_abs.to_path_buf().into_os_string();
    cuda_out.push(".cuda");
    cuda_out
}

/// Sets up the CUDA backend for `cmd`: `CUDA_INJECTION64_PATH` (the driver loads the injection
/// at `cuInit`) and `NVTX_INJECTION64_PATH` (NVTX ranges reach CUPTI through it) to
/// `libofftrace_cuda.so` next to the offtrace binary (or `OFFTRACE_CUDA_AGENT`), unless the user
/// set them. Returns whether the injection is there.
fn cuda_env(cmd: &mut Command) -> bool {
    let lib = std::env::var_os("OFFTRACE_CUDA_AGENT")
        .map(PathBuf::from)
        .unwrap_or_else(|| exe_dir().unwrap_or_default().join("libofftrace_cuda.so"));
    if !lib.is_file() {
        return false;
    }
    let lib = lib.canonicalize().unwrap_or(lib);
    for var in ["CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH"] {
        if std::env::var_os(var).is_none_or(|v| v.is_empty()) {
            cmd.env(var, &lib);
        }
    }
    true
}

/// Runs the program with signals forwarded, then summarises the trace (with the OpenCL mode
/// when it is not the layer's); returns its exit code.
fn spawn_and_summarize(
    mut cmd: Command,
    program_path: &Path,
    output_abs: &Path,
    output: &Path,
    opencl: Option<&crate::opencl_loader::Choice>,
) -> anyhow::Result<u8> {
    let cuda_output =
        cmd.get_envs().find(|(k, _)| *k == "OFFTRACE_CUDA_OUTPUT").and_then(|(_, v)| v.map(PathBuf::from));
    signals::install().context("cannot install signal forwarding")?;
    let mut child = cmd.spawn().with_context(|| format!("cannot start {}", program_path.display()))?;
    signals::set_child(child.id());
    let counters = crate::metrics_cmd::after_spawn(&cmd, child.id());
    let status = child.wait().context("waiting for the program")?;
    signals::set_child(0);
    counters.print();
    let code = {
        use std::os::unix::process::ExitStatusExt;
        match (status.code(), status.signal()) {
            (Some(c), _) => u8::try_from(c & 0xff).unwrap_or(1),
            (None, Some(sig)) => u8::try_from(128 + sig).unwrap_or(255),
            _ => 1,
        }
    };
    // A program that used CUDA alone wrote only the CUDA backend's trace: that is the trace.
    if let Some(cuda) = cuda_output.filter(|c| c.exists() && !output_abs.exists()) {
        let _ = std::fs::rename(&cuda, output_abs);
    }
    let removed = remove_empty_cuda_companions(output_abs);
    summarize_all(output_abs, output);
    for (path, pid) in removed {
        eprintln!(
            "offtrace: {}: the CUDA backend recorded no call in pid {pid} (a runtime beside it, such as NVIDIA's OpenCL, \
             initialised CUDA): its empty trace was removed",
            crate::traces::shown_as(output, output_abs, &path).display()
        );
    }
    if let Some(line) = opencl.and_then(crate::opencl_loader::Choice::summary_line) {
        eprintln!("{line}");
    }
    Ok(code)
}

/// The CUDA backend's traces beside another backend's (`FILE.cuda`, `FILE.cuda.<pid>`) that hold
/// no record of the program's (no API call, no device activity, no allocation: the recording's
/// metadata alone) are removed, with their process id: a process whose OpenCL runtime is NVIDIA's
/// initialises CUDA (the driver then loads the injection) without making a CUDA call of its own,
/// and each such program used to leave an empty `FILE.cuda` and a second summary line for the same
/// process. Only when the process wrote a trace of another backend beside it (its `.cuda` is a
/// companion, not the recording's only trace).
fn remove_empty_cuda_companions(output_abs: &Path) -> Vec<(PathBuf, String)> {
    if !output_abs.exists() {
        return Vec::new();
    }
    let name = output_abs.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut removed = Vec::new();
    for path in crate::traces::siblings(output_abs) {
        let file = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let Some(rest) = file.strip_prefix(&name).and_then(|r| r.strip_prefix(".cuda")) else { continue };
        let (pid, _) = crate::traces::process_of(&path);
        let Some(pid) = pid else { continue };
        // `FILE.cuda` belongs to the process that wrote `FILE`; `FILE.cuda.<pid>` to the process
        // that wrote `FILE.<pid>`.
        let companion = if rest.is_empty() {
            output_abs.to_path_buf()
        } else {
            output_abs.with_file_name(format!("{name}.{}", &rest[1..]))
        };
        if companion.exists()
            && crate::traces::process_of(&companion).0.as_deref() == Some(pid.as_str())
            && !holds_program_records(&path)
            && std::fs::remove_file(&path).is_ok()
        {
            removed.push((path, pid));
        }
    }
    removed
}

/// Whether the trace holds anything of the program's: an API call, a device activity or a
/// memory record (not only the recording's definitions, info and end). An unreadable trace
/// counts as holding something (it is reported, not removed).
fn holds_program_records(path: &Path) -> bool {
    holds(path, true, |r| matches!(r, Record::ApiCall(_) | Record::Activity(_) | Record::Memory(_)))
}

/// Whether the trace at `path` holds a record `wanted` accepts (API calls read apart count as
/// `ApiCall`s), reading only up to the first. A trace that cannot be opened counts as holding
/// one (the summary reported it already); one damaged before a match counts as `damaged` says.
fn holds(path: &Path, damaged: bool, wanted: impl Fn(&Record) -> bool) -> bool {
    let options = ReadOptions { api_args: false, api_calls_apart: true, ..ReadOptions::default() };
    let Ok(mut reader) = TraceRecords::open(path, options) else { return true };
    while let Some(batch) = reader.next_batch() {
        if let Batch::Records(batch) = batch
            && (!reader.api_calls().is_empty() || batch.iter().any(&wanted))
        {
            return true;
        }
    }
    damaged && reader.into_outcome().problem.is_some()
}

/// After the summary (and after any hint about a failed start, which says more): one hint when
/// the recording holds no API call of any backend. `preload`: the OpenCL layer was in preload
/// mode, so suggesting that mode would send the user in a circle.
fn nothing_recorded_hint(output_abs: &Path, preload: bool) {
    if !any_api_call(output_abs) {
        eprintln!("{}", if preload { NOTHING_RECORDED_IN_PRELOAD_MODE_HINT } else { NOTHING_RECORDED_HINT });
    }
}

/// The hint after a recording that holds no API call of any backend (no trace at all, or
/// traces of metadata alone): offtrace saw none of the program's runtime calls.
const NOTHING_RECORDED_HINT: &str = "offtrace: hint: no SYCL, OpenCL or CUDA call was recorded. If the program makes \
    such calls, its OpenCL ICD loader may not have loaded offtrace's layer (try `--opencl-interpose preload`, \
    docs/opencl.md), or a backend library is not built next to offtrace (libofftrace_agent.so, \
    libofftrace_opencl.so, libofftrace_cuda.so).";

/// The same after a recording in OpenCL preload mode: what preload mode cannot reach.
const NOTHING_RECORDED_IN_PRELOAD_MODE_HINT: &str = "offtrace: hint: no SYCL, OpenCL or CUDA call was recorded \
    (OpenCL layer in preload mode). If the program makes such calls, it may call its OpenCL loader through its \
    own dlopen and dlsym, which preload mode does not see (docs/opencl.md, *Loaders without layer support*), or \
    a backend library is not built next to offtrace (libofftrace_agent.so, libofftrace_opencl.so, \
    libofftrace_cuda.so).";

/// Whether any trace of this recording (the output and its per-process siblings) holds an API
/// call. Reads each trace only up to its first call (a normal trace: its first chunk).
fn any_api_call(output_abs: &Path) -> bool {
    std::iter::once(output_abs.to_path_buf()).chain(crate::traces::siblings(output_abs)).any(|p| has_api_call(&p))
}

fn has_api_call(path: &Path) -> bool {
    path.exists() && holds(path, false, |r| matches!(r, Record::ApiCall(_)))
}

/// The OpenCL layer next to this executable (`cargo build -p offtrace-opencl`), or
/// `OFFTRACE_OPENCL_LAYER`.
pub(crate) fn find_opencl_layer() -> Option<PathBuf> {
    let p = std::env::var_os("OFFTRACE_OPENCL_LAYER")
        .map(PathBuf::from)
        .or_else(|| exe_dir().map(|d| d.join(OPENCL_LAYER_LIB)))?;
    p.is_file().then(|| p.canonicalize().unwrap_or(p))
}

/// Whether `lib` exports the OpenCL layer's entry points (the agent links `offtrace-opencl`).
fn hosts_opencl_layer(lib: &Path) -> bool {
    crate::opencl_loader::file_names(lib, b"clInitLayerWithProperties\0")
}

/// OpenCL: the layer is added to `OPENCL_LAYERS`, the ICD loaders' layer list (the Khronos
/// loader and ocl-icd >= 2.3.0 read it), last, so that it is the outermost layer and sees the
/// program's calls as the program made them. Every OpenCL call of the program then goes through
/// it: its own, pyopencl's, or the SYCL runtime's UR OpenCL adapter's.
///
/// Preload mode (the program's loader has no layer support, or `--opencl-interpose preload`):
/// the layer is also appended to `LD_PRELOAD`, with `OFFTRACE_OPENCL_LOADER` naming the loader
/// found. `OPENCL_LAYERS` stays: a layer-capable loader the program reaches otherwise (the SYCL
/// runtime's own, which UR looks up by its handle) still runs the layer, and once the preloaded
/// exports own the layer it passes every such loader through (no call twice:
/// `crates/offtrace-opencl/src/preload.rs`).
pub(crate) fn opencl_environment(cmd: &mut Command, layer: &Path, choice: &crate::opencl_loader::Choice) {
    let mut v = std::env::var_os("OPENCL_LAYERS").filter(|o| !o.is_empty()).unwrap_or_default();
    if !v.is_empty() {
        v.push(":");
    }
    v.push(layer.as_os_str());
    cmd.env("OPENCL_LAYERS", v);
    if choice.preload {
        let mut p = std::env::var_os("LD_PRELOAD").filter(|o| !o.is_empty()).unwrap_or_default();
        if !p.is_empty() {
            p.push(":");
        }
        p.push(layer.as_os_str());
        cmd.env("LD_PRELOAD", p);
        if let Some(loader) = &choice.loader {
            cmd.env("OFFTRACE_OPENCL_LOADER", loader);
        }
    }
}

/// [`summarize`] for each trace of the recording: with several (one per traced process), a
/// line saying so, then each trace's line and its process.
fn summarize_all(output_abs: &Path, output: &Path) {
    let others = crate::traces::siblings(output_abs);
    if others.is_empty() {
        summarize(output_abs, output);
        return;
    }
    eprintln!("offtrace: {} traces written, one per traced process:", others.len() + 1);
    for path in std::iter::once(output_abs.to_path_buf()).chain(others) {
        summarize(&path, &crate::traces::shown_as(output, output_abs, &path));
        let (pid, command) = crate::traces::process_of(&path);
        eprintln!(
            "offtrace:   pid {}: {}",
            pid.as_deref().unwrap_or("unknown"),
            command.as_deref().unwrap_or("(command unknown)")
        );
    }
}

/// Prints `offtrace: <records> records, <drops> dropped, <file> (<size>)`, with a warning for a
/// truncated trace; `<records>` is `report`'s count: the records a reader delivers (each
/// definition once), the `End` record included; a missing or unreadable trace is a warning too
/// (the exit status stays the program's).
fn summarize(path: &Path, shown: &Path) {
    let size = match std::fs::metadata(path) {
        Ok(m) => m.len(),
        Err(_) => {
            eprintln!(
                "offtrace: warning: no trace was written to {} (did the program load a SYCL, OpenCL or CUDA runtime? is the agent loadable?)",
                shown.display()
            );
            return;
        }
    };
    // A cleanly finished trace keeps the agent's totals in its `End` record, in the last chunk:
    // scanning the chunk framing and decoding only that chunk keeps this line cheap for large
    // traces (the program has exited; the user is waiting). Anything else is read in full.
    if let Ok(scan) = TraceReader::summary_scan(path)
        && scan.finished_cleanly
        && let Ok(Some(tail)) = TraceReader::open_at_last_chunk(path, &scan)
    {
        let end = tail.filter_map(Result::ok).find_map(|r| match r {
            Record::End { records, drops } => Some((records, drops)),
            _ => None,
        });
        if let Some((records, drops)) = end {
            // `End` counts each definition once, as `report` does (the framing's count includes
            // the repeated definitions, docs/format.md), and the records before it.
            eprintln!(
                "offtrace: {} records, {} dropped, {} ({})",
                format::count(records + 1),
                format::count(drops),
                shown.display(),
                format::bytes(size)
            );
            drops_hint(drops);
            return;
        }
    }
    // Read as `report` reads it (repeated definitions dropped), so that the two counts agree.
    let options = ReadOptions { api_args: false, api_calls_apart: true, ..ReadOptions::default() };
    let mut reader = match TraceRecords::open(path, options) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("offtrace: warning: {}: {e}", shown.display());
            return;
        }
    };
    let (mut records, mut drops) = (0u64, 0u64);
    while let Some(batch) = reader.next_batch() {
        if let Batch::Records(batch) = batch {
            records += (batch.len() + reader.api_calls().len()) as u64;
            drops += batch.iter().map(|r| if let Record::Drops { count, .. } = r { *count } else { 0 }).sum::<u64>();
            reader.recycle(batch);
        }
    }
    let problem = reader.into_outcome().problem;
    eprintln!(
        "offtrace: {} records, {} dropped, {} ({})",
        format::count(records),
        format::count(drops),
        shown.display(),
        format::bytes(size)
    );
    drops_hint(drops);
    if let Some(e) = problem {
        if e.is_truncated() {
            eprintln!("offtrace: warning: the trace is truncated (the program did not exit normally?): {e}");
        } else {
            eprintln!("offtrace: warning: {e}");
        }
    }
}

/// One line after a summary that counted drops: what they are and how to have none.
fn drops_hint(drops: u64) {
    if drops > 0 {
        eprintln!(
            "offtrace: note: records were dropped where a thread filled its buffer faster than the writer emptied it \
             (the report says which threads); `offtrace record --lossless` keeps every record, the program waiting instead"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A trace of process `pid` holding `records` after its Info records.
    fn trace(path: &Path, pid: &str, records: &[Record]) {
        use offtrace_format::{TraceHeader, TraceWriter};
        let mut w = TraceWriter::new(Vec::new(), &TraceHeader::monotonic()).expect("writer");
        w.write(&Record::Info { key: "pid".into(), value: pid.into() }).expect("info");
        w.write(&Record::Info { key: "command".into(), value: "prog".into() }).expect("info");
        for r in records {
            w.write(r).expect("record");
        }
        std::fs::write(path, w.finish().expect("finish")).expect("write");
    }

    #[test]
    fn an_empty_cuda_companion_of_the_same_process_is_removed_and_nothing_else() {
        let dir = tempfile::tempdir().expect("tmp");
        let main = dir.path().join("t.offtrace");
        let call = Record::ApiCall(offtrace_format::ApiCall { tid: 1, start: 10, end: 20, ..Default::default() });
        let alloc = Record::Memory(offtrace_format::MemoryRecord { tid: 1, ts: 15, ..Default::default() });
        trace(&main, "7", std::slice::from_ref(&call));
        trace(&dir.path().join("t.offtrace.cuda"), "7", &[]);
        // A child (pid 9) whose CUDA trace holds an allocation: kept; one whose companion is
        // another process's (pid 10 against 11): kept.
        trace(&dir.path().join("t.offtrace.9"), "9", std::slice::from_ref(&call));
        trace(&dir.path().join("t.offtrace.cuda.9"), "9", &[alloc]);
        trace(&dir.path().join("t.offtrace.11"), "11", &[call]);
        trace(&dir.path().join("t.offtrace.cuda.11"), "10", &[]);
        let removed = remove_empty_cuda_companions(&main);
        assert_eq!(removed, vec![(dir.path().join("t.offtrace.cuda"), "7".to_owned())]);
        assert!(!dir.path().join("t.offtrace.cuda").exists());
        for kept in ["t.offtrace", "t.offtrace.9", "t.offtrace.cuda.9", "t.offtrace.11", "t.offtrace.cuda.11"] {
            assert!(dir.path().join(kept).exists(), "{kept}");
        }
        // A CUDA trace that is the recording's only trace is never a companion.
        let alone = tempfile::tempdir().expect("tmp");
        trace(&alone.path().join("u.offtrace.cuda"), "7", &[]);
        assert!(remove_empty_cuda_companions(&alone.path().join("u.offtrace")).is_empty());
    }

    #[test]
    fn a_vendors_folder_of_a_dead_run_is_removed_and_a_live_ones_kept() {
        let tmp = std::env::temp_dir().join(format!("offtrace-icd-test-{}", std::process::id()));
        std::fs::create_dir_all(&tmp).expect("tmp");
        // pid_max is at most 2^22 on Linux: this process cannot exist.
        let dead = tmp.join("offtrace-icd-4194305");
        let live = tmp.join(format!("offtrace-icd-{}", std::process::id()));
        let init = tmp.join("offtrace-icd-1");
        let other = tmp.join("offtrace-icd-notapid");
        for d in [&dead, &live, &init, &other] {
            std::fs::create_dir_all(d).expect("dir");
            std::fs::write(d.join("x.icd"), b"lib\n").expect("file");
        }
        remove_stale_vendor_folders(&tmp);
        assert!(!dead.exists(), "a dead run's folder is removed");
        assert!(live.exists() && init.exists(), "folders of live processes are kept");
        assert!(other.exists(), "a name that is not offtrace-icd-<pid> is left alone");
        std::fs::remove_dir_all(&tmp).expect("clean");
    }
}
