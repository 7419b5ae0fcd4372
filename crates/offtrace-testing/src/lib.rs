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
