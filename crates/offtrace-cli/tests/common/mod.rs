//! What the OpenCL end-to-end tests share: a C program built against the system's OpenCL, or
//! the test skipped where the OpenCL tests are (`OFFTRACE_SKIP_OPENCL=1`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository's root.
#[allow(dead_code, reason = "each test binary compiles this module; not every one needs it")]
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("workspace root")
}

/// `src` built with `cc <flags> src -lOpenCL <libs> -o dir/name`; None when OpenCL tests are
/// skipped. Fails the test, saying what to install, where PoCL or the headers are missing.
pub fn opencl_program(dir: &Path, src: &Path, name: &str, flags: &[&str], libs: &[&str]) -> Option<PathBuf> {
    if std::env::var_os("OFFTRACE_SKIP_OPENCL").is_some_and(|v| v == "1") {
        return None;
    }
    assert!(
        Path::new("/etc/OpenCL/vendors/pocl.icd").exists() && Path::new("/usr/include/CL/cl.h").exists(),
        "PoCL or the OpenCL headers are missing: run scripts/setup-opencl.sh (or OFFTRACE_SKIP_OPENCL=1 to skip)"
    );
    let exe = dir.join(name);
    let st =
        Command::new("cc").args(flags).arg(src).arg("-lOpenCL").args(libs).arg("-o").arg(&exe).status().expect("cc");
    assert!(st.success(), "cc {} failed", src.display());
    Some(exe)
}
