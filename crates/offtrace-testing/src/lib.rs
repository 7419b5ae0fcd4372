//! Test support for the workspace's test suites (a dev-dependency, never shipped).
//!
//! [`in_own_process`] runs a test's body in a process of its own. The tracing services, the
//! OpenCL layer's tables and its harvest thread, and the CUDA backend's start from the
//! environment are process-wide, and some tests exercise what happens once per process (a
//! start from the environment, the layer's stop at exit). nextest runs every test in a process
//! of its own; plain `cargo test` runs a crate's tests as threads of one process, where such a
//! test would leave its state to the tests that run after it, or read state they left. A test
//! that needs its own process says so by calling [`in_own_process`], and then passes under
//! both runners.
//!
//! ```no_run
//! #[test]
//! fn the_start_from_the_environment_arms_the_profiler() {
//!     offtrace_testing::in_own_process(
//!         "tests::the_start_from_the_environment_arms_the_profiler",
//!         &[("OFFTRACE_QUERY_METRICS", "cpu.sw")],
//!         || { /* the test, in a fresh process with that environment */ },
//!     );
//! }
//! ```

#![forbid(unsafe_code)]

use std::process::Command;

/// Set in the child to the test it runs: the body runs there, and only there.
const CHILD: &str = "OFFTRACE_TEST_IN_OWN_PROCESS";

/// Runs `body` in a process of its own: the running test binary again, asked for the test
/// `name` alone (its full path as libtest prints it, without the crate name), with `env` added
/// to its environment; fails when that process fails or did not run the test (a misspelt
/// `name` matches nothing, which libtest counts as a pass). In the child, runs `body`.
///
/// Costs one process start per call (the test binary's, a few milliseconds), also under
/// nextest, so that the test runs the same way under both runners. The environment goes to
/// the child through `Command::env`: the test never calls `std::env::set_var` while other
/// threads may read the environment.
pub fn in_own_process(name: &str, env: &[(&str, &str)], body: impl FnOnce()) {
    if std::env::var_os(CHILD).is_some_and(|v| v == name) {
        body();
        return;
    }
    let exe = std::env::current_exe().expect("the running test binary");
    let out = Command::new(exe)
        .args([name, "--exact", "--test-threads=1", "--nocapture"])
        .env(CHILD, name)
        .envs(env.iter().copied())
        .output()
        .expect("start the test binary again");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{name} failed in its own process:\n{text}");
    assert!(text.contains("test result: ok. 1 passed"), "{name} did not run in its own process (its name?):\n{text}");
}

/// Why the shared library `so` (a workspace `cdylib` that a test loads into a program, such as
/// `target/debug/libofftrace_opencl.so`) is older than the code it was built from, or `None`
/// when it is not (or cannot be told: no dependency file beside it). `cargo nextest run -p X`
/// and `cargo test -p X` build the crate's rlib for the test, not its shared library, so a
/// test run after a change would otherwise load the library of an earlier build and test old
/// code without a word. The sources are the ones cargo lists in the dependency file it writes
/// beside the library (`libX.d`, rewritten by every build of the crate's library, rlib or not);
/// the answer names the first newer one and the command that rebuilds the library.
pub fn stale_library(so: &std::path::Path, package: &str) -> Option<String> {
    let built = std::fs::metadata(so).and_then(|m| m.modified()).ok()?;
    let deps = std::fs::read_to_string(so.with_extension("d")).ok()?;
    let (_, sources) = deps.lines().next()?.split_once(": ")?;
    // Paths are separated by spaces; a space inside a path is written `\ `.
    let sources = sources.replace("\\ ", "\u{0}");
    sources.split(' ').filter(|s| !s.is_empty()).map(|s| std::path::PathBuf::from(s.replace('\u{0}', " "))).find_map(
        |src| {
            let changed = std::fs::metadata(&src).and_then(|m| m.modified()).ok()?;
            (changed > built).then(|| {
                format!(
                    "{} is older than {}: run `cargo build -p {package}` (a test run builds the crate's rlib, not the \
                     library it loads into the program)",
                    so.display(),
                    src.display()
                )
            })
        },
    )
}

/// Fails the test, with the `cargo build -p ...` that fixes it, when a library that `offtrace
/// record` loads from next to its binary `bin` (the agent, the OpenCL layer, offtrace's XPTI
/// dispatcher: those built) is older than one of its sources ([`stale_library`]).
pub fn assert_fresh_libraries(bin: &std::path::Path) {
    let Some(dir) = bin.parent() else { return };
    let libraries = [
        ("libofftrace_agent.so", "offtrace-agent"),
        ("libofftrace_opencl.so", "offtrace-opencl"),
        ("libxptifw.so", "offtrace-xptifw"),
    ];
    if let Some(why) = libraries.iter().find_map(|(so, package)| stale_library(&dir.join(so), package)) {
        panic!("{why}");
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    fn touch(p: &std::path::Path, t: SystemTime) {
        std::fs::File::options().write(true).open(p).expect("open").set_modified(t).expect("set mtime");
    }

    #[test]
    fn a_library_older_than_a_source_is_stale() {
        let d = std::env::temp_dir().join(format!("offtrace-testing-stale-{}", std::process::id()));
        std::fs::create_dir_all(d.join("a dir")).expect("dir");
        let so = d.join("libx.so");
        let (a, b) = (d.join("a.rs"), d.join("a dir").join("b.rs"));
        for p in [&so, &a, &b] {
            std::fs::write(p, "").expect("write");
        }
        let b_escaped = b.display().to_string().replace(' ', "\\ ");
        std::fs::write(d.join("libx.d"), format!("{}: {} {b_escaped}\n", d.join("libx.rlib").display(), a.display()))
            .expect("write");
        let now = SystemTime::now();
        touch(&so, now);
        touch(&a, now - Duration::from_secs(60));
        touch(&b, now - Duration::from_secs(60));
        assert_eq!(super::stale_library(&so, "x"), None);
        touch(&b, now + Duration::from_secs(60));
        let why = super::stale_library(&so, "x").expect("stale");
        assert!(why.contains("b.rs") && why.contains("cargo build -p x"), "{why}");
        assert_eq!(super::stale_library(&d.join("missing.so"), "x"), None);
        let _ = std::fs::remove_dir_all(&d);
    }
}
