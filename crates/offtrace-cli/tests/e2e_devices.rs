//! The traced program sees the OpenCL platforms and devices it sees without offtrace, on the
//! real runtimes: Intel's SYCL runtime (the project's venv, `OFFTRACE_SKIP_SYCL=1` skips) and
//! PoCL (`OFFTRACE_SKIP_OPENCL=1` skips the C program). `record` used to add the SYCL runtime's
//! OpenCL CPU runtime to the ICD loaders' list, so dpctl picked another default device traced
//! than untraced; now only `record --intel-opencl` adds it. The agent, the dispatcher and the
//! layer must be built next to `offtrace` (`scripts/test.sh` builds them).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;

/// `offtrace`, once the libraries it loads into the program are checked to be current.
fn offtrace() -> Command {
    offtrace_testing::assert_fresh_libraries(Path::new(env!("CARGO_BIN_EXE_offtrace")));
    Command::new(env!("CARGO_BIN_EXE_offtrace"))
}

fn venv() -> Option<PathBuf> {
    if std::env::var_os("OFFTRACE_SKIP_SYCL").is_some_and(|v| v == "1") {
        return None;
    }
    let v =
        std::env::var_os("OFFTRACE_SYCL_VENV").map(PathBuf::from).unwrap_or_else(|| common::workspace().join(".venv"));
    assert!(
        v.join("lib/libsycl.so.9").exists() && v.join("lib/libintelocl.so").exists() && v.join("bin/python").exists(),
        "no SYCL runtime in {}: run scripts/setup-sycl.sh (or set OFFTRACE_SYCL_VENV, or OFFTRACE_SKIP_SYCL=1 to skip)",
        v.display()
    );
    Some(v)
}

/// The ICD loaders' variables are the user's: none here, so each run sees the default list.
fn without_icd_variables(c: &mut Command) -> &mut Command {
    c.env_remove("OCL_ICD_FILENAMES").env_remove("OCL_ICD_VENDORS")
}

fn plain(program: &[&std::ffi::OsStr]) -> Output {
    without_icd_variables(Command::new(program[0]).args(&program[1..])).output().expect("run the program")
}

/// `offtrace record [--intel-opencl]` of `program` on the venv's runtime.
fn traced(venv: &Path, dir: &Path, name: &str, intel_opencl: bool, program: &[&std::ffi::OsStr]) -> Output {
    let mut c = offtrace();
    c.arg("record");
    if intel_opencl {
        c.arg("--intel-opencl");
    }
    c.arg("--runtime").arg(venv).arg("-o").arg(dir.join(format!("{name}.offtrace"))).arg("--").args(program);
    without_icd_variables(&mut c).output().expect("run offtrace record")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The lines a listing program printed, checked to have run and listed something.
fn listing(o: &Output, what: &str) -> Vec<String> {
    assert!(o.status.success(), "{what}: {}\n{}", text(&o.stdout), text(&o.stderr));
    let lines: Vec<String> = text(&o.stdout).lines().map(str::to_owned).collect();
    assert!(!lines.is_empty(), "{what}: no device listed\n{}", text(&o.stderr));
    lines
}

/// The runtime's OpenCL CPU runtime names its platform so (`Intel(R) OpenCL`).
const INTEL_PLATFORM: &str = "Intel(R) OpenCL";

/// `with` is `without` plus devices of Intel's platform only; `tag` names the listing.
fn adds_intels_platform_only(without: &[String], with: &[String], tag: &str) {
    let extra: Vec<&String> = with.iter().filter(|l| !without.contains(l)).collect();
    assert!(without.iter().all(|l| with.contains(l)), "{tag}: --intel-opencl hid a device: {without:?} vs {with:?}");
    assert!(!extra.is_empty(), "{tag}: --intel-opencl added no device: {with:?}");
    assert!(extra.iter().all(|l| l.contains(INTEL_PLATFORM)), "{tag}: added {extra:?}");
}

/// dpctl (the SYCL runtime's UR OpenCL adapter, through the venv's Khronos loader) lists the
/// same devices and picks the same default device under `record` as without it; with
/// `--intel-opencl`, Intel's CPU device in addition.
#[test]
fn a_sycl_program_sees_the_devices_it_sees_without_offtrace() {
    let Some(venv) = venv() else { return };
    let dir = tempfile::tempdir().expect("tmp");
    let script = "import dpctl\n\
                  for d in dpctl.get_devices():\n    print('device', d.sycl_platform.name, '|', d.name)\n\
                  print('default', dpctl.SyclQueue().sycl_device.name)\n";
    let py = venv.join("bin/python");
    let program = [py.as_os_str(), "-c".as_ref(), script.as_ref()];
    let untraced = listing(&plain(&program), "plain");
    let recorded = listing(&traced(&venv, dir.path(), "default", false, &program), "record");
    assert_eq!(recorded, untraced, "record changed what the program sees");
    assert!(untraced.iter().all(|l| !l.contains(INTEL_PLATFORM)), "the venv's ICD is read by no loader: {untraced:?}");
    let added = listing(&traced(&venv, dir.path(), "intel", true, &program), "record --intel-opencl");
    let devices = |l: &[String]| l.iter().filter(|l| l.starts_with("device ")).cloned().collect::<Vec<_>>();
    adds_intels_platform_only(&devices(&untraced), &devices(&added), "dpctl");
}

/// A C program that lists every platform and device. Linked with `-lOpenCL`: it gets the
/// system's ocl-icd untraced and under `record` (with the agent as an `OPENCL_LAYERS` layer);
/// the list is the same.
const LIST_DEVICES: &str = r#"
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>

int main(void) {
    cl_platform_id platforms[16];
    cl_uint np = 0;
    if (clGetPlatformIDs(16, platforms, &np) != CL_SUCCESS) return 1;
    for (cl_uint p = 0; p < np && p < 16; p++) {
        char pname[256] = {0};
        clGetPlatformInfo(platforms[p], CL_PLATFORM_NAME, sizeof pname - 1, pname, NULL);
        cl_device_id devices[16];
        cl_uint nd = 0;
        if (clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 16, devices, &nd) != CL_SUCCESS) nd = 0;
        for (cl_uint d = 0; d < nd && d < 16; d++) {
            char dname[256] = {0};
            clGetDeviceInfo(devices[d], CL_DEVICE_NAME, sizeof dname - 1, dname, NULL);
            printf("%s | %s\n", pname, dname);
        }
    }
    return 0;
}
"#;

#[test]
fn an_opencl_program_sees_the_devices_it_sees_without_offtrace() {
    let Some(venv) = venv() else { return };
    let dir = tempfile::tempdir().expect("tmp");
    let src = dir.path().join("list_devices.c");
    std::fs::write(&src, LIST_DEVICES).expect("write list_devices.c");
    let Some(exe) = common::opencl_program(dir.path(), &src, "list_devices", &["-O1"], &[]) else { return };
    let program = [exe.as_os_str()];
    let untraced = listing(&plain(&program), "plain");
    let recorded = listing(&traced(&venv, dir.path(), "default", false, &program), "record");
    assert_eq!(recorded, untraced, "record changed what the program sees");
    let added = listing(&traced(&venv, dir.path(), "intel", true, &program), "record --intel-opencl");
    adds_intels_platform_only(&untraced, &added, "C");
}

/// A dpctl program that needs USM fails on PoCL (the only device here without offtrace): traced
/// it fails the same way, and the summary ends with one hint naming `--intel-opencl`; with the
/// flag it runs on Intel's device and no hint is printed. Wherever the default device supports
/// USM, the program succeeds both ways and no hint is printed.
#[test]
fn a_failing_sycl_program_fails_the_same_way_traced_and_the_summary_hints_at_the_flag() {
    let Some(venv) = venv() else { return };
    let dir = tempfile::tempdir().expect("tmp");
    let script = "import dpctl, dpctl.memory as dm\n\
                  q = dpctl.SyclQueue()\n\
                  dm.MemoryUSMDevice(4096, queue=q)\n\
                  print('allocated on', q.sycl_device.name)\n";
    let py = venv.join("bin/python");
    let program = [py.as_os_str(), "-c".as_ref(), script.as_ref()];
    let untraced = plain(&program);
    let recorded = traced(&venv, dir.path(), "default", false, &program);
    let err = text(&recorded.stderr);
    assert_eq!(recorded.status.code(), untraced.status.code(), "plain: {}\nrecord: {err}", text(&untraced.stderr));
    assert_eq!(text(&recorded.stdout), text(&untraced.stdout));
    let last = err.lines().last().unwrap_or_default();
    let hint = "offtrace: hint: the program exited with status";
    if untraced.status.success() {
        assert!(!err.contains(hint), "{err}");
    } else {
        assert!(err.contains("USMAllocationError"), "{err}");
        assert!(last.starts_with(hint) && last.contains("--intel-opencl"), "the summary's last line: {err}");
        assert_eq!(err.matches(hint).count(), 1, "{err}");
    }
    let added = traced(&venv, dir.path(), "intel", true, &program);
    let err = text(&added.stderr);
    assert!(added.status.success(), "--intel-opencl: {err}");
    assert!(!err.contains(hint), "{err}");
}

/// The shared libraries a program printed as `map <path>` lines (its `/proc/self/maps`), those
/// of offtrace (the agent, the dispatcher, the layer: next to the `offtrace` executable) apart.
fn loaded_libraries(o: &Output, what: &str) -> (Vec<String>, Vec<String>) {
    assert!(o.status.success(), "{what}: {}\n{}", text(&o.stdout), text(&o.stderr));
    let ours = Path::new(env!("CARGO_BIN_EXE_offtrace")).canonicalize().expect("offtrace").with_file_name("");
    let mut libs: Vec<String> =
        text(&o.stdout).lines().filter_map(|l| l.strip_prefix("map ")).map(str::to_owned).collect();
    libs.sort();
    libs.dedup();
    assert!(libs.iter().any(|l| l.contains("libc.so")), "{what}: no libraries listed: {}", text(&o.stdout));
    libs.into_iter().partition(|l| !Path::new(l).starts_with(&ours))
}

/// The libraries a program loads are the ones it loads without offtrace, but for offtrace's
/// own. `record` used to put the SYCL runtime's lib folder first in `LD_LIBRARY_PATH`: a C
/// program linked with `-lOpenCL` then loaded the venv's Khronos loader instead of the
/// system's ocl-icd, PoCL the venv's hwloc instead of the system's, and any program the venv's
/// TBB, compiler runtime and the like before the system's.
#[test]
fn an_opencl_program_loads_the_libraries_it_loads_without_offtrace() {
    let Some(venv) = venv() else { return };
    let dir = tempfile::tempdir().expect("tmp");
    let src = dir.path().join("loaded_libraries.c");
    std::fs::write(&src, LOADED_LIBRARIES).expect("write loaded_libraries.c");
    let Some(exe) = common::opencl_program(dir.path(), &src, "loaded_libraries", &["-O1"], &[]) else { return };
    let program = [exe.as_os_str()];
    let (untraced, _) = loaded_libraries(&plain(&program), "plain");
    let (recorded, ours) = loaded_libraries(&traced(&venv, dir.path(), "default", false, &program), "record");
    assert_eq!(recorded, untraced, "record changed the program's libraries");
    assert!(ours.iter().any(|l| l.ends_with(".so")), "no offtrace library in the traced program: {ours:?}");
}

/// The same for a program of the SYCL venv: its Python extensions find the runtime through
/// their RUNPATH, the runtime's libraries each other through `$ORIGIN`.
#[test]
fn a_sycl_program_loads_the_libraries_it_loads_without_offtrace() {
    let Some(venv) = venv() else { return };
    let dir = tempfile::tempdir().expect("tmp");
    let script = "import dpctl\n\
                  q = dpctl.SyclQueue()\n\
                  print('default', q.sycl_device.name)\n\
                  with open('/proc/self/maps') as f:\n    \
                      for p in {l.split()[-1] for l in f if '.so' in l and '/' in l}: print('map', p)\n";
    let py = venv.join("bin/python");
    let program = [py.as_os_str(), "-c".as_ref(), script.as_ref()];
    let (untraced, _) = loaded_libraries(&plain(&program), "plain");
    let (recorded, ours) = loaded_libraries(&traced(&venv, dir.path(), "default", false, &program), "record");
    assert!(untraced.iter().any(|l| l.ends_with("/libsycl.so.9")), "{untraced:?}");
    assert_eq!(recorded, untraced, "record changed the program's libraries");
    assert!(ours.len() >= 2, "the agent and the dispatcher in the traced program: {ours:?}");
}

/// Lists every platform and device (which initialises each ICD), then prints the shared
/// libraries the process has mapped.
const LOADED_LIBRARIES: &str = r#"
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <string.h>

int main(void) {
    cl_platform_id platforms[16];
    cl_uint np = 0;
    if (clGetPlatformIDs(16, platforms, &np) != CL_SUCCESS) return 1;
    for (cl_uint p = 0; p < np && p < 16; p++) {
        cl_device_id devices[16];
        cl_uint nd = 0;
        clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 16, devices, &nd);
    }
    FILE *maps = fopen("/proc/self/maps", "r");
    if (!maps) return 1;
    char line[4096];
    while (fgets(line, sizeof line, maps)) {
        char *path = strchr(line, '/');
        if (path && strstr(path, ".so")) printf("map %s", path);
    }
    return 0;
}
"#;
