//! Helpers shared by the agent's integration tests against the real SYCL runtime: where the
//! workspace, the SYCL venv and the bundled workloads are, the reference subscriber, the freshly
//! built agent cdylib, and per-test temporary folders.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("workspace root")
}

/// The SYCL venv (`OFFTRACE_SYCL_VENV`, default `<workspace>/.venv`); `None` only when it is
/// missing and `OFFTRACE_SKIP_SYCL=1`, else a panic that says how to install it.
pub fn venv() -> Option<PathBuf> {
    let v = std::env::var_os("OFFTRACE_SYCL_VENV").map(PathBuf::from).unwrap_or_else(|| workspace().join(".venv"));
    if v.join("bin/python").exists() && v.join("lib/libxptifw.so.1").exists() {
        return Some(v);
    }
    if std::env::var("OFFTRACE_SKIP_SYCL").is_ok_and(|s| s == "1") {
        eprintln!("skipping: no SYCL venv at {} (OFFTRACE_SKIP_SYCL=1)", v.display());
        return None;
    }
    panic!(
        "no SYCL venv at {} (python + lib/libxptifw.so.1): run scripts/setup-sycl.sh, set OFFTRACE_SYCL_VENV, \
         or set OFFTRACE_SKIP_SYCL=1 to skip",
        v.display()
    );
}

/// A bundled SYCL program (`examples/sycl/<name>`).
pub fn workload(name: &str) -> PathBuf {
    let p = workspace().join("examples/sycl").join(name);
    assert!(p.exists(), "{} is missing", p.display());
    p
}

/// The reference full-dump subscriber (`tools/xpti-dump`), built against the venv's dispatcher
/// by `scripts/build-xpti-dump.sh` (once per build; concurrent tests wait for each other).
pub fn xpti_dump(venv: &Path) -> PathBuf {
    let o = Command::new(workspace().join("scripts/build-xpti-dump.sh"))
        .arg(venv)
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("run scripts/build-xpti-dump.sh");
    assert!(o.status.success(), "scripts/build-xpti-dump.sh failed (needs cc)");
    PathBuf::from(String::from_utf8(o.stdout).expect("utf-8 path").trim())
}

/// The agent cdylib, (re)built by `cargo build -p offtrace-agent --lib` into this test's target
/// directory and profile: `cargo test` builds the crate as an rlib for the test harness and does
/// not refresh `target/<profile>/libofftrace_agent.so` itself.
pub fn agent() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let exe = std::env::current_exe().expect("test exe");
            let profile_dir = exe.parent().and_then(Path::parent).expect("target/<profile>").to_path_buf();
            let target_dir = profile_dir.parent().expect("target dir");
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| option_env!("CARGO").unwrap_or("cargo").to_owned());
            let mut cmd = Command::new(cargo);
            cmd.args(["build", "-q", "-p", "offtrace-agent", "--lib"])
                .env("CARGO_TARGET_DIR", target_dir)
                .current_dir(workspace());
            if profile_dir.file_name().is_some_and(|n| n == "release") {
                cmd.arg("--release");
            }
            let st = cmd.status().expect("run cargo build");
            assert!(st.success(), "cargo build -p offtrace-agent failed");
            let so = profile_dir.join("libofftrace_agent.so");
            assert!(so.exists(), "{} not built", so.display());
            so
        })
        .clone()
}

/// A fresh temporary folder `offtrace-<tag>-<name>-<pid>`, removed when the test is done with
/// it ([`TestDir`]).
pub fn tmpdir(tag: &str, name: &str) -> TestDir {
    let d = std::env::temp_dir().join(format!("offtrace-{tag}-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("tmp dir");
    TestDir(d)
}

/// A temporary folder, removed on drop unless the test is failing (then kept, and named on
/// stderr, for a look at what the run left there).
pub struct TestDir(PathBuf);

impl std::ops::Deref for TestDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for TestDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("kept {} for inspection", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}
