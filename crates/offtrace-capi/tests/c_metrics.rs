//! The `offtrace_metric_*` C API from C: compiles `tests/c/metrics.c` against the built
//! `libofftrace.so` and the checked-in header (`-Wall -Wextra -Werror`) and runs it.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::process::Command;

#[test]
fn metrics_c_api_follows_the_seed() {
    let exe = std::env::current_exe().unwrap();
    let lib = exe.parent().unwrap().parent().unwrap().to_path_buf();
    assert!(lib.join("libofftrace.so").exists(), "libofftrace.so not in {}", lib.display());
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("c_metrics_{}", std::process::id()));
    let r = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-std=c11", "-D_POSIX_C_SOURCE=200809L", "-Wall", "-Wextra", "-Werror", "-O1", "-g", "-I"])
        .arg(root.join("include"))
        .arg(root.join("tests/c/metrics.c"))
        .arg("-o")
        .arg(&out)
        .arg("-L")
        .arg(&lib)
        .arg("-lofftrace")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .output()
        .unwrap();
    assert!(r.status.success(), "cc failed:\n{}", String::from_utf8_lossy(&r.stderr));
    let r = Command::new(&out).output().unwrap();
    let stdout = String::from_utf8_lossy(&r.stdout);
    assert!(r.status.success(), "metrics.c failed:\n{stdout}{}", String::from_utf8_lossy(&r.stderr));
    for want in ["ok enumeration", "ok streamer:", "ok reading a closed streamer -> INVALID_NULL_HANDLE", "all ok"] {
        assert!(stdout.contains(want), "missing {want:?} in:\n{stdout}");
    }
    let _ = std::fs::remove_file(&out);
}
