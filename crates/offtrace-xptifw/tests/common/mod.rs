//! Shared helpers for the dispatcher's integration tests: find the built `libxptifw.so`, give it
//! the `libxptifw.so.1` name runtimes link against, and build/run the C and C++ test programs
//! under `tests/c/` with the system gcc/g++.
//!
//! The cdylib is found next to the test binary (`target/<profile>/libxptifw.so`); when it is
//! missing (a test run without a prior `cargo build`), `cargo build -p offtrace-xptifw` is run
//! for the same profile.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// `target/<profile>` of this test binary.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("deps dir");
    deps.parent().expect("profile dir").to_path_buf()
}

/// A private directory holding `libxptifw.so` and `libxptifw.so.1` (a copy: the test must not
/// see a library replaced by a concurrent build halfway through).
pub fn lib_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let prof = profile_dir();
        let built = prof.join("libxptifw.so");
        if !built.exists() {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let mut cmd = Command::new(cargo);
            cmd.args(["build", "-p", "offtrace-xptifw"]);
            if prof.file_name().is_some_and(|n| n == "release") {
                cmd.arg("--release");
            }
            let st = cmd.status().expect("run cargo build");
            assert!(st.success(), "cargo build -p offtrace-xptifw failed");
        }
        let dir = std::env::temp_dir().join(format!("offtrace-xptifw-tests-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        // Removed when the test process exits (nextest runs each test in a process of its own).
        extern "C" fn remove_lib_dir() {
            if let Some(d) = DIR.get() {
                let _ = std::fs::remove_dir_all(d);
            }
        }
        // SAFETY: registers a plain function; `atexit` only fails when out of memory, and then
        // the folder stays, as before.
        #[allow(unsafe_code)]
        unsafe {
            libc::atexit(remove_lib_dir)
        };
        std::fs::copy(&built, dir.join("libxptifw.so")).expect("copy libxptifw.so");
        std::fs::copy(&built, dir.join("libxptifw.so.1")).expect("copy libxptifw.so.1");
        dir
    })
}

/// `tests/c/`.
pub fn c_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("c")
}

/// Compiles `src` (under `tests/c/`) into an executable or, with `shared`, a shared library,
/// linked against the dispatcher in [`lib_dir`] (recorded as its rpath).
pub fn build(src: &str, shared: bool) -> PathBuf {
    let cpp = src.ends_with(".cpp");
    let stem = Path::new(src).file_stem().expect("stem").to_string_lossy().into_owned();
    let out = lib_dir().join(if shared { format!("lib{stem}.so") } else { stem });
    let mut cmd = Command::new(if cpp { "g++" } else { "gcc" });
    cmd.arg(c_dir().join(src)).arg("-o").arg(&out).arg("-O1").arg("-g").arg("-Wall").arg("-I").arg(c_dir());
    cmd.arg(if cpp { "-std=c++17" } else { "-std=gnu11" });
    if shared {
        cmd.args(["-shared", "-fPIC"]);
    }
    cmd.arg(format!("-L{}", lib_dir().display()))
        .arg("-l:libxptifw.so.1")
        .arg(format!("-Wl,--disable-new-dtags,-rpath,{}", lib_dir().display()))
        .arg("-lpthread");
    let o = cmd.output().expect("run the C compiler");
    assert!(o.status.success(), "compiling {src} failed:\n{}", String::from_utf8_lossy(&o.stderr));
    out
}

/// Runs a program with every `XPTI_*` / `OFFTRACE_XPTI_*` variable removed, plus `env`.
pub fn run(exe: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(exe);
    cmd.args(args);
    for (k, _) in std::env::vars() {
        if k.starts_with("XPTI_") || k.starts_with("OFFTRACE_XPTI_") {
            cmd.env_remove(k);
        }
    }
    cmd.envs(env.iter().copied());
    cmd.output().expect("run test program")
}

/// Asserts a zero exit status, printing the program's output otherwise.
pub fn assert_ok(what: &str, o: &Output) {
    assert!(
        o.status.success(),
        "{what} failed ({:?}):\n--- stdout\n{}\n--- stderr\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}
