//! The UR table is generated, not hand-edited: running the checked-in generator on the header it
//! names reproduces `src/ur.rs` byte for byte. Needs python3, rustfmt and the SYCL venv's
//! `include/unified-runtime/ur_api.h` (`OFFTRACE_SYCL_VENV`, default `<workspace>/.venv`); a
//! second-tier test (fails without them unless OFFTRACE_SKIP_SYCL=1).

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

#[test]
fn generator_reproduces_the_table() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let venv = std::env::var_os("OFFTRACE_SYCL_VENV").map(PathBuf::from).unwrap_or_else(|| root.join(".venv"));
    let header = venv.join("include/unified-runtime/ur_api.h");
    let tools = ["python3", "rustfmt"].iter().all(|t| Command::new(t).arg("--version").output().is_ok());
    if !header.exists() || !tools {
        // Like the other runtime tests: skipped only when asked to (OFFTRACE_SKIP_SYCL=1).
        assert!(
            std::env::var("OFFTRACE_SKIP_SYCL").is_ok_and(|s| s == "1"),
            "needs {} and python3 + rustfmt (OFFTRACE_SKIP_SYCL=1 skips)",
            header.display()
        );
        eprintln!("skipping: no {} (OFFTRACE_SKIP_SYCL=1)", header.display());
        return;
    }
    let out = std::env::temp_dir().join(format!("offtrace-ur-{}.rs", std::process::id()));
    let st = Command::new("python3").arg(root.join("scripts/gen_ur_table.py")).arg(&header).arg(&out).status().unwrap();
    assert!(st.success());
    let generated = std::fs::read_to_string(&out).unwrap();
    let _ = std::fs::remove_file(&out);
    let checked_in = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/ur.rs")).unwrap();
    assert!(generated == checked_in, "src/ur.rs differs from the generator's output: run scripts/gen_ur_table.py");
}

#[test]
fn ids_and_positions_agree_with_the_table() {
    use offtrace_xpti_abi::ur::{self, id, param};
    let f = ur::function(id::ENQUEUE_KERNEL_LAUNCH_WITH_ARGS_EXP).unwrap();
    assert_eq!(f.name, "urEnqueueKernelLaunchWithArgsExp");
    assert_eq!(f.params[param::enqueue_kernel_launch_with_args_exp::PH_EVENT].name, "phEvent");
    assert_eq!(f.params[param::enqueue_kernel_launch_with_args_exp::H_QUEUE].name, "hQueue");
    let f = ur::function(id::USM_DEVICE_ALLOC).unwrap();
    assert_eq!(f.params[param::usm_device_alloc::SIZE].name, "size");
    assert_eq!(f.params[param::usm_device_alloc::PP_MEM].name, "ppMem");
}
