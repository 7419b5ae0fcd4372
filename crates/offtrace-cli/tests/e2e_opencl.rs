//! `offtrace record` of programs that use OpenCL alone (no SYCL runtime loaded: the OpenCL
//! layer hosts the recorder), on PoCL (`scripts/setup-opencl.sh`; `OFFTRACE_SKIP_OPENCL=1`
//! skips): `--metrics` samples land in the trace, and every traced process keeps its trace.
//! The agent and the layer must be built next to `offtrace` (`scripts/test.sh` builds them).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;
use common::{opencl_program, workspace};

/// `offtrace`, once the libraries it loads into the program are checked to be current.
fn offtrace() -> Command {
    offtrace_testing::assert_fresh_libraries(Path::new(env!("CARGO_BIN_EXE_offtrace")));
    Command::new(env!("CARGO_BIN_EXE_offtrace"))
}

/// `examples/opencl/vector_add.c` built into `dir`; None when OpenCL tests are skipped.
fn vector_add(dir: &Path) -> Option<PathBuf> {
    opencl_program(dir, &workspace().join("examples/opencl/vector_add.c"), "vector_add", &["-O2"], &[])
}

fn ok(o: &Output) {
    assert!(
        o.status.success(),
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `offtrace report --format json` of a trace (the whole trace must decode).
fn report(path: &Path) -> serde_json::Value {
    let o = offtrace().args(["report", "--format", "json"]).arg(path).output().expect("report");
    ok(&o);
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert!(r["trace"]["complete"].as_bool().expect("complete"), "{}", path.display());
    r
}

/// The samples of counter `name` in a report (0 when it has none).
fn samples(r: &serde_json::Value, name: &str) -> u64 {
    r["counters"]
        .as_array()
        .expect("counters")
        .iter()
        .find(|c| c["name"] == name)
        .map_or(0, |c| c["samples"].as_u64().expect("samples"))
}

fn calls(r: &serde_json::Value, operation: &str) -> u64 {
    r["api_calls"]
        .as_array()
        .expect("api_calls")
        .iter()
        .filter(|c| c["operation"] == operation)
        .map(|c| c["calls"].as_u64().expect("calls"))
        .sum()
}

/// `record --metrics` was silently ignored for OpenCL-only programs: the layer hosted the
/// recorder but no sampler. Through `record` (the agent as the layer) and through the layer
/// library alone (`OPENCL_LAYERS`), the trace holds the groups' samples.
#[test]
fn metrics_are_sampled_into_an_opencl_only_programs_trace() {
    let dir = tempfile::tempdir().expect("tmp");
    let Some(prog) = vector_add(dir.path()) else { return };
    let trace = dir.path().join("m.offtrace");
    let o = offtrace()
        .args(["record", "--metrics", "proc.process", "--sample-period", "5ms", "-o"])
        .arg(&trace)
        .arg("--")
        .arg(&prog)
        .args(["--platform", "Portable", "--iters", "50"])
        .output()
        .expect("record");
    ok(&o);
    let r = report(&trace);
    assert!(samples(&r, "proc.process.cpu_time") > 0, "record: {}", r["counters"]);

    let layer = Path::new(env!("CARGO_BIN_EXE_offtrace")).with_file_name("libofftrace_opencl.so");
    assert!(layer.exists(), "{} is not built: cargo build -p offtrace-opencl", layer.display());
    if let Some(why) = offtrace_testing::stale_library(&layer, "offtrace-opencl") {
        panic!("{why}");
    }
    let alone = dir.path().join("layer.offtrace");
    let o = Command::new(&prog)
        .args(["--platform", "Portable", "--iters", "50"])
        .env("OPENCL_LAYERS", &layer)
        .env("OFFTRACE_OUTPUT", &alone)
        .env("OFFTRACE_METRICS", "proc.process")
        .env("OFFTRACE_SAMPLE_PERIOD_NS", "5000000")
        .output()
        .expect("run");
    ok(&o);
    let r = report(&alone);
    assert_eq!(r["trace"]["info"]["backend"], "opencl");
    assert!(samples(&r, "proc.process.cpu_time") > 0, "the layer alone: {}", r["counters"]);
}

/// Two OpenCL programs run one after the other under one `record`: the second used to replace
/// the first's trace (the file was claimed only against a live writer). Each keeps its trace.
#[test]
fn each_opencl_program_of_a_recording_keeps_its_trace() {
    let dir = tempfile::tempdir().expect("tmp");
    let Some(prog) = vector_add(dir.path()) else { return };
    let trace = dir.path().join("two.offtrace");
    let run = format!("{p} --platform Portable --iters 3 && {p} --platform Portable --iters 4", p = prog.display());
    let o = offtrace().arg("record").arg("-o").arg(&trace).args(["--", "sh", "-c", &run]).output().expect("record");
    ok(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("offtrace: 2 traces written, one per traced process:"), "{err}");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.path())
        .expect("dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("two.offtrace")))
        .collect();
    files.sort();
    assert_eq!(files.len(), 2, "{files:?}");
    let (first, second) = (report(&files[0]), report(&files[1]));
    let pid = |r: &serde_json::Value| r["trace"]["info"]["pid"].as_str().expect("pid").to_owned();
    assert_ne!(pid(&first), pid(&second));
    assert_eq!(files[1], dir.path().join(format!("two.offtrace.{}", pid(&second))));
    // The first program launched 3 kernels, the second 4: neither trace replaced the other.
    let launches = |r: &serde_json::Value| calls(r, "clEnqueueNDRangeKernel");
    assert_eq!((launches(&first), launches(&second)), (3, 4));
}

/// `record`'s summary line counts the records `report` counts (the `End` record included).
#[test]
fn the_record_summary_counts_what_the_report_counts() {
    let dir = tempfile::tempdir().expect("tmp");
    let Some(prog) = vector_add(dir.path()) else { return };
    let trace = dir.path().join("va.offtrace");
    let o =
        offtrace().arg("record").arg("-o").arg(&trace).arg("--").arg(&prog).args(["--platform", "Portable"]).output();
    let o = o.expect("record");
    ok(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    let summary: u64 = err
        .lines()
        .find_map(|l| l.strip_prefix("offtrace: ")?.split_once(" records, "))
        .map(|(n, _)| n.replace(',', "").parse().expect("count"))
        .unwrap_or_else(|| panic!("no summary line: {err}"));
    assert_eq!(summary, report(&trace)["trace"]["records"].as_u64().expect("records"), "{err}");
}

/// `vector_add` maps its 256 KiB result and unmaps it: the report names the map and the unmap
/// (not a read and a write) and gives each the bytes the map covered (the unmap call names
/// only the mapped pointer: it had 0 bytes).
#[test]
fn a_map_and_its_unmap_carry_the_mapped_bytes() {
    let dir = tempfile::tempdir().expect("tmp");
    let Some(prog) = vector_add(dir.path()) else { return };
    let trace = dir.path().join("va.offtrace");
    let o =
        offtrace().arg("record").arg("-o").arg(&trace).arg("--").arg(&prog).args(["--platform", "Portable"]).output();
    ok(&o.expect("record"));
    let r = report(&trace);
    let row = |name: &str| {
        let rows: Vec<&serde_json::Value> =
            r["device_activity"].as_array().expect("device_activity").iter().filter(|d| d["name"] == name).collect();
        assert_eq!(rows.len(), 1, "{name}: {}", r["device_activity"]);
        (rows[0]["count"].as_u64().expect("count"), rows[0]["bytes"].as_u64().expect("bytes"))
    };
    assert_eq!(row("map"), (1, 256 * 1024));
    assert_eq!(row("unmap"), (1, 256 * 1024));
    assert_eq!(row("buffer_read"), (1, 256 * 1024), "the read alone, not the map");
    assert_eq!(row("buffer_write"), (2, 512 * 1024), "the two writes alone, not the unmap");
    // Copies by direction (and their bandwidth) hold the reads and writes; the map and the
    // unmap are counted apart (on PoCL's host memory they copy nothing).
    let copies: Vec<(&str, u64)> = r["memory"]["copies"]
        .as_array()
        .expect("copies")
        .iter()
        .map(|c| (c["direction"].as_str().expect("direction"), c["bytes"].as_u64().expect("bytes")))
        .collect();
    let direction = |d: &str| copies.iter().find(|c| c.0 == d).map(|c| c.1);
    assert_eq!(direction("HOST_TO_DEVICE"), Some(512 * 1024), "the two writes, not the unmap: {copies:?}");
    assert_eq!(direction("DEVICE_TO_HOST"), Some(256 * 1024), "the read, not the map: {copies:?}");
    assert_eq!(
        (r["memory"]["maps"]["count"].as_u64(), r["memory"]["maps"]["bytes"].as_u64()),
        (Some(2), Some(512 * 1024))
    );
}

/// `examples/opencl/ooo_threads.c` (three threads, an out-of-order queue each, wait lists across
/// queues, a user event, markers and barriers with wait lists, sub-buffers, rect copies, a map,
/// images) on PoCL with `--profile`: what the report says against what the program read from its
/// own events. The queues were reported never destroyed: the layer took the program's last
/// release for a release of one reference among several (the runtime's count includes the
/// events the layer still held for its harvest of out-of-order commands).
#[test]
fn a_program_with_three_out_of_order_queues_reads_as_it_profiled_itself() {
    let dir = tempfile::tempdir().expect("tmp");
    let Some(prog) = opencl_program(
        dir.path(),
        &workspace().join("examples/opencl/ooo_threads.c"),
        "ooo_threads",
        &["-O2"],
        &["-lpthread"],
    ) else {
        return;
    };
    let trace = dir.path().join("ooo.offtrace");
    let o = offtrace()
        .arg("record")
        .arg("-o")
        .arg(&trace)
        .arg("--")
        .arg(&prog)
        .args(["--profile", "--platform", "Portable", "--rounds", "2"])
        .output()
        .expect("record");
    ok(&o);
    // The program's own view: per label, its commands and the sum of END - START.
    let mut own: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
    let mut per_thread = std::collections::BTreeMap::<String, u64>::new();
    for line in String::from_utf8_lossy(&o.stdout).lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.first() == Some(&"cmd") {
            let (start, end): (u64, u64) = (f[6].parse().expect("START"), f[7].parse().expect("END"));
            let e = own.entry(f[3].to_string()).or_default();
            e.0 += 1;
            e.1 += end - start;
            *per_thread.entry(f[1].to_string()).or_default() += 1;
        }
    }
    assert_eq!(per_thread.len(), 3, "{}", String::from_utf8_lossy(&o.stdout));
    let r = report(&trace);
    // Each operation of the trace is the sum of the program's labels it stands for.
    let expect =
        |labels: &[&str]| labels.iter().filter_map(|l| own.get(*l)).fold((0, 0), |(c, t), (n, d)| (c + n, t + d));
    for (name, labels) in [
        ("scale", &["scale"][..]),
        ("add_one", &["add_one"]),
        ("buffer_write", &["write"]),
        ("image_write", &["image_write"]),
        ("buffer_read_rect", &["read_rect"]),
        ("image_read", &["image_read"]),
        ("buffer_copy", &["copy"]),
        ("buffer_copy_rect", &["copy_rect"]),
        ("image_copy", &["image_copy"]),
        ("buffer_fill", &["fill"]),
        ("barrier", &["barrier"]),
        ("marker", &["marker"]),
        ("map", &["map"]),
        ("unmap", &["unmap"]),
    ] {
        let row = r["device_activity"]
            .as_array()
            .expect("device_activity")
            .iter()
            .find(|d| d["name"] == name)
            .unwrap_or_else(|| panic!("{name}: {}", r["device_activity"]));
        let got =
            (row["device_count"].as_u64().expect("device_count"), row["device_total_ns"].as_u64().expect("total"));
        assert_eq!(got, expect(labels), "{name}: (commands, device ns) against the program's {labels:?}");
    }
    let queues = r["queues"].as_array().expect("queues");
    assert_eq!(queues.len(), 3, "{}", r["queues"]);
    for (q, n) in queues.iter().zip(per_thread.values()) {
        assert_eq!(q["in_order"], false, "{q}");
        assert_eq!(q["total_commands"].as_u64(), Some(*n), "{q}");
        assert!(q["destroyed_ns"].is_u64(), "every queue was released by the program: {q}");
    }
    // SQLite: the properties the program gave its queues (out-of-order, profiling); on main
    // `flags` held only the in-order bit.
    let rows =
        sql(&trace, "for r in db.execute('SELECT flags, in_order, profiling, properties FROM queues'): print(*r)");
    assert_eq!(rows.lines().collect::<Vec<_>>(), ["2 0 1 [\"PROFILING\"]"; 3], "{rows}");
}

/// `examples/opencl/regions.c` on PoCL, recorded; returns the program's stdout, the trace and
/// its JSON report (None when OpenCL tests are skipped).
fn record_regions(dir: &Path) -> Option<(String, PathBuf, serde_json::Value)> {
    record_regions_with(dir, &[])
}

fn record_regions_with(dir: &Path, args: &[&str]) -> Option<(String, PathBuf, serde_json::Value)> {
    let prog = opencl_program(dir, &workspace().join("examples/opencl/regions.c"), "regions", &["-O2"], &[])?;
    let trace = dir.join("regions.offtrace");
    let o = offtrace()
        .arg("record")
        .arg("-o")
        .arg(&trace)
        .arg("--")
        .arg(&prog)
        .args(args)
        .args(["--platform", "Portable"])
        .output()
        .expect("record");
    ok(&o);
    let r = report(&trace);
    Some((String::from_utf8_lossy(&o.stdout).into_owned(), trace, r))
}

/// Runs SQL through Python's sqlite3 module (a reader independent of the exporter) on the
/// SQLite export of `trace`; returns what the script prints.
fn sql(trace: &Path, script: &str) -> String {
    let db = trace.with_extension("sqlite");
    let o = offtrace().arg("export").arg(trace).args(["--format", "sqlite", "-o"]).arg(&db).output().expect("export");
    ok(&o);
    let py = Command::new("python3")
        .arg("-c")
        .arg(format!("import json, sqlite3, sys\ndb = sqlite3.connect(sys.argv[1])\n{script}"))
        .arg(&db)
        .output()
        .expect("python3");
    ok(&py);
    String::from_utf8_lossy(&py.stdout).into_owned()
}

/// Two 16 KiB sub-buffers of a 64 KiB buffer, beside another 64 KiB buffer and two 8 KiB
/// images, all live at once: the peak is the objects' 144 KiB. A sub-buffer's bytes are its
/// parent's (on main each sub-buffer was an allocation of its own: 176 KiB). The kernel run on
/// the second sub-buffer names it (its handle) in its allocation properties, and its
/// `sub_alloc` row leads to its parent through the call that made it.
#[test]
fn sub_buffers_are_parts_of_their_parent_not_more_live_memory() {
    let dir = tempfile::tempdir().expect("tmp");
    let Some((out, trace, r)) = record_regions(dir.path()) else { return };
    let handle = |name: &str| -> u64 {
        let f: Vec<&str> = out.lines().next().expect("objects line").split_whitespace().collect();
        let i = f.iter().position(|w| *w == name).expect(name);
        u64::from_str_radix(f[i + 1].trim_start_matches("0x"), 16).expect("handle")
    };
    assert!(out.contains("images yes"), "PoCL's CPU device has images: {out}");
    let m = &r["memory"];
    assert_eq!(m["peak_live_bytes"].as_u64(), Some(2 * 65536 + 2 * 8192), "{m}");
    assert_eq!(
        (m["sub_allocations"]["count"].as_u64(), m["sub_allocations"]["bytes"].as_u64()),
        (Some(2), Some(32768))
    );
    let allocated: u64 =
        m["allocations"].as_array().expect("allocations").iter().map(|a| a["count"].as_u64().expect("count")).sum();
    assert_eq!(allocated, 4, "{m}");
    assert_eq!((m["live_bytes_at_end"].as_u64(), m["unmatched_frees"].as_u64()), (Some(0), Some(0)));
    let rows = sql(
        &trace,
        "for r in db.execute(\"SELECT m.address, m.bytes, json_extract(c.args, '$.buffer') FROM memory m \
         JOIN api_calls_named c ON c.correlation = m.correlation WHERE m.op = 'sub_alloc' ORDER BY m.id\"): print(*r)\n\
         for (a,) in db.execute(\"SELECT allocations FROM device_activity WHERE name = 'add_one'\"):\n    \
         print('kernel', *[int(x['base'], 16) for x in json.loads(a)])",
    );
    let whole = handle("whole");
    let parent = format!("{whole:#x}");
    assert_eq!(
        rows.lines().collect::<Vec<_>>(),
        [
            format!("{} 16384 {parent}", handle("sub1")),
            format!("{} 16384 {parent}", handle("sub2")),
            format!("kernel {}", handle("sub2"))
        ],
        "sub-buffers (address, bytes, parent) and the kernel's allocation"
    );
}

/// A buffer the program releases while a command on it still waits (PoCL's command holds a
/// reference of its own, so the runtime's `CL_MEM_REFERENCE_COUNT` is 2 at that release): the
/// program's last reference went there, and the trace frees it. On main the layer read the
/// runtime's count, recorded no free, and the report showed the 64 KiB live at the end (and,
/// by timing, the same for `regions.c`'s buffers under load).
#[test]
fn a_buffer_released_while_its_command_waits_is_freed_at_that_release() {
    let dir = tempfile::tempdir().expect("tmp");
    let Some((out, trace, r)) = record_regions_with(dir.path(), &["--release-early"]) else { return };
    assert!(out.contains("released early"), "{out}");
    let m = &r["memory"];
    let allocated: u64 =
        m["allocations"].as_array().expect("allocations").iter().map(|a| a["count"].as_u64().expect("count")).sum();
    assert_eq!(allocated, 1, "{m}");
    assert_eq!(m["peak_live_bytes"].as_u64(), Some(65536), "{m}");
    assert_eq!((m["live_bytes_at_end"].as_u64(), m["unmatched_frees"].as_u64()), (Some(0), Some(0)), "{m}");
    // The kernel (held by the waiting command) and its program (held by the kernel) are
    // unloaded at the program's releases too, each before the command completes.
    let handle = |name: &str| -> u64 {
        let f: Vec<&str> = out.lines().next().expect("released line").split_whitespace().collect();
        let i = f.iter().position(|w| *w == name).expect(name);
        u64::from_str_radix(f[i + 1].trim_start_matches("0x"), 16).expect("handle")
    };
    let rows = sql(
        &trace,
        "for r in db.execute(\"SELECT op, phase, handle FROM code_objects WHERE phase = 4 ORDER BY id\"): print(*r)",
    );
    assert_eq!(
        rows.lines().collect::<Vec<_>>(),
        [format!("program 4 {}", handle("program")), format!("kernel 4 {}", handle("kernel"))],
        "unloads (op, phase, handle)"
    );
    // The report matches each unload to its load: the kernel by name, nothing left loaded.
    let objects = r["code_objects"].as_array().expect("code_objects");
    let of = |op: &str| objects.iter().find(|c| c["operation"] == op).unwrap_or_else(|| panic!("{op}: {objects:?}"));
    for op in ["program", "kernel"] {
        let c = of(op);
        assert_eq!(
            (c["loads"].as_u64(), c["unloads"].as_u64(), c["loaded_at_end"].as_u64()),
            (Some(1), Some(1), Some(0)),
            "{c}"
        );
    }
    assert!(of("program")["bytes"].as_u64().is_some_and(|b| b > 0), "the source's size: {objects:?}");
    let kernel = &of("kernel")["names"][0];
    assert_eq!((kernel["name"].as_str(), kernel["unloads"].as_u64()), (Some("add_one"), Some(1)), "{objects:?}");
}

/// Rect copies and image commands on PoCL, each on a region of 512 bytes inside objects of 8 to
/// 64 KiB: each is named for what it is (on main they were `buffer_read` / `buffer_write` /
/// `buffer_copy` / `buffer_fill` / `map`) and carries the region's bytes (an image's region is in
/// pixels: main counted 128 "bytes" for 128 four-byte pixels), and the copies' bandwidth
/// counts those bytes.
#[test]
fn rect_and_image_commands_are_named_for_what_they_do_with_the_regions_bytes() {
    let dir = tempfile::tempdir().expect("tmp");
    let Some((out, _, r)) = record_regions(dir.path()) else { return };
    fn name(label: &str) -> &str {
        match label {
            "write_rect" => "buffer_write_rect",
            "copy_rect" => "buffer_copy_rect",
            "read_rect" => "buffer_read_rect",
            "image_to_buffer" => "image_to_buffer",
            "buffer_to_image" => "buffer_to_image",
            "image_unmap" => "unmap",
            "kernel" => "add_one",
            other => other,
        }
    }
    let mut expected: Vec<(String, u64)> = out
        .lines()
        .filter_map(|l| l.strip_prefix("cmd "))
        .map(|l| {
            let (label, bytes) = l.split_once(' ').expect("cmd LABEL BYTES");
            (name(label).to_owned(), bytes.parse().expect("bytes"))
        })
        .collect();
    assert_eq!(expected.len(), 12, "{out}");
    let mut got: Vec<(String, u64)> = r["device_activity"]
        .as_array()
        .expect("device_activity")
        .iter()
        .map(|d| {
            assert_eq!(d["count"].as_u64(), Some(1), "{d}");
            (d["name"].as_str().expect("name").to_owned(), d["bytes"].as_u64().expect("bytes"))
        })
        .collect();
    expected.sort();
    got.sort();
    assert_eq!(got, expected, "(name, bytes) per command");
    // Directions: the writes from the host, the reads to it, the rest between device objects.
    let copies: Vec<(&str, u64, u64)> = r["memory"]["copies"]
        .as_array()
        .expect("copies")
        .iter()
        .map(|c| {
            (
                c["direction"].as_str().expect("direction"),
                c["count"].as_u64().expect("count"),
                c["bytes"].as_u64().expect("bytes"),
            )
        })
        .collect();
    assert_eq!(
        copies,
        [("HOST_TO_DEVICE", 2, 1024), ("DEVICE_TO_HOST", 2, 1024), ("DEVICE_TO_DEVICE", 4, 2048)],
        "write_rect + image_write, read_rect + image_read, copy_rect + image_copy + image_to_buffer + buffer_to_image"
    );
    let m = &r["memory"];
    assert_eq!((m["fills"]["count"].as_u64(), m["fills"]["bytes"].as_u64()), (Some(1), Some(512)));
    assert_eq!((m["maps"]["count"].as_u64(), m["maps"]["bytes"].as_u64()), (Some(2), Some(1024)));
}

/// The queue of `regions.c` was created with no properties: in-order, and no profiling asked
/// for (the layer turns it on for itself; the program's wish is what `queues` shows).
#[test]
fn sqlite_queues_show_what_the_program_asked_for() {
    let dir = tempfile::tempdir().expect("tmp");
    let Some((_, trace, _)) = record_regions(dir.path()) else { return };
    let rows =
        sql(&trace, "for r in db.execute('SELECT flags, in_order, profiling, properties FROM queues'): print(*r)");
    assert_eq!(rows.trim(), "1 1 0 [\"IN_ORDER\"]");
}

/// `examples/opencl/two_devices.c` recorded on PoCL and the SYCL venv's Intel CPU runtime at
/// once (`OFFTRACE_SYCL_VENV`, default `.venv`): the trace and the program's stdout (None when
/// OpenCL tests are skipped).
fn record_two_devices(dir: &Path) -> Option<(PathBuf, String)> {
    let prog = opencl_program(dir, &workspace().join("examples/opencl/two_devices.c"), "two_devices", &["-O1"], &[])?;
    let venv = std::env::var_os("OFFTRACE_SYCL_VENV").map_or_else(|| workspace().join(".venv"), PathBuf::from);
    let intel = venv.join("lib/libintelocl.so");
    assert!(intel.exists(), "{}: run scripts/setup-sycl.sh (or set OFFTRACE_SYCL_VENV)", intel.display());
    let vendors = dir.join("vendors");
    std::fs::create_dir_all(&vendors).expect("vendors");
    std::fs::copy("/etc/OpenCL/vendors/pocl.icd", vendors.join("pocl.icd")).expect("pocl.icd");
    std::fs::write(vendors.join("intel.icd"), format!("{}\n", intel.display())).expect("intel.icd");
    let trace = dir.join("two.offtrace");
    let o = offtrace()
        .arg("record")
        .arg("-o")
        .arg(&trace)
        .arg("--")
        .arg(&prog)
        .env("OCL_ICD_VENDORS", &vendors)
        .output()
        .expect("record");
    ok(&o);
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(stdout.contains("check ok"), "{stdout}");
    Some((trace, stdout))
}

/// `examples/opencl/two_devices.c`: PoCL and Intel's CPU runtime at once, a context and an
/// in-order and an out-of-order profiling queue on each, writes, kernels, fills, copies with
/// event wait lists, markers with a wait list, maps and unmaps. Each command is on its own
/// device and queue, in the program's order, with the device time the program read from its
/// own event (to the ns), and the two devices' clocks are put in order: Intel's first write
/// waits on a user event that PoCL's first kernel sets when it completes, so in the trace it
/// starts after that kernel ended (PoCL's device clock is about 248 ms from Intel's here).
/// Needs the SYCL venv's Intel runtime beside PoCL (`OFFTRACE_SYCL_VENV`, default `.venv`).
#[test]
fn two_devices_at_once_each_command_on_its_device_and_queue_and_the_clocks_in_order() {
    let dir = tempfile::tempdir().expect("tmp");
    let Some((trace, stdout)) = record_two_devices(dir.path()) else { return };
    // The program's commands per device (0 PoCL, 1 Intel).
    struct Own {
        label: String,
        in_order: bool,
        queued: u64,
        start: u64,
        end: u64,
    }
    let mut own: [Vec<Own>; 2] = Default::default();
    for f in stdout.lines().map(|l| l.split_whitespace().collect::<Vec<_>>()).filter(|f| f.first() == Some(&"cmd")) {
        let dev: usize = f[1].parse().expect("device");
        let t = |i: usize| -> u64 { f[i].parse().expect("a profiling time") };
        own[dev].push(Own { label: f[3].to_string(), in_order: f[4] == "in", queued: t(5), start: t(7), end: t(8) });
    }
    assert_eq!((own[0].len(), own[1].len()), (9, 9), "{stdout}");
    let rows = sql(
        &trace,
        "for r in db.execute('''SELECT d.name, q.in_order, a.queue_id, a.name, a.device_start_ns, a.device_end_ns,
             c.start_ns, c.end_ns FROM device_activity a JOIN devices d ON d.device = a.device
             JOIN queues q ON q.id = a.queue_id JOIN api_calls c ON c.correlation = a.correlation
             ORDER BY a.enqueue_ns, a.id'''): print(*r, sep='|')",
    );
    /// A device-activity row with its queue's order and its enqueue call's interval.
    struct Row {
        in_order: bool,
        queue: u64,
        name: String,
        start: u64,
        end: u64,
        call_start: u64,
        call_end: u64,
    }
    let mut trace_rows: [Vec<Row>; 2] = Default::default();
    for l in rows.lines() {
        let f: Vec<&str> = l.split('|').collect();
        let dev = usize::from(!f[0].contains("pthread"));
        let n = |i: usize| -> u64 { f[i].parse().expect("a number") };
        trace_rows[dev].push(Row {
            in_order: f[1] == "1",
            queue: n(2),
            name: f[3].to_string(),
            start: n(4),
            end: n(5),
            call_start: n(6),
            call_end: n(7),
        });
    }
    let op = |label: &str| match label {
        "write" | "copy" | "fill" | "read" => format!("buffer_{label}"),
        other => other.to_string(),
    };
    let mut queues = std::collections::BTreeSet::new();
    for dev in 0..2 {
        assert_eq!(trace_rows[dev].len(), 9, "device {dev}: {rows}");
        let mut dev_queues = std::collections::BTreeSet::new();
        for (o, r) in own[dev].iter().zip(&trace_rows[dev]) {
            let label = &o.label;
            assert_eq!(r.name, op(label), "device {dev}: {rows}");
            assert_eq!(r.in_order, o.in_order, "device {dev} {label}: the queue it was enqueued on");
            assert_eq!(r.end - r.start, o.end - o.start, "device {dev} {label}: device time against the program's");
            // The clock conversion: the runtime takes QUEUED inside the enqueue call, so the
            // program's QUEUED, converted as the trace converted START, lies within the call
            // (give or take the calibration's uncertainty, a few µs; PoCL's times unconverted
            // would be 248 ms off). Intel's markers have no QUEUED (0).
            if o.queued != 0 {
                let converted = i128::from(o.queued) + i128::from(r.start) - i128::from(o.start);
                assert!(
                    (i128::from(r.call_start) - 50_000..=i128::from(r.call_end) + 50_000).contains(&converted),
                    "device {dev} {label}: QUEUED at {converted} in the trace's clock, the call {}..{}",
                    r.call_start,
                    r.call_end
                );
            }
            dev_queues.insert(r.queue);
        }
        assert_eq!(dev_queues.len(), 2, "device {dev}: {rows}");
        queues.extend(dev_queues);
    }
    assert_eq!(queues.len(), 4, "no queue shared between the devices: {rows}");
    // Each queue's context is defined as the SYCL backend defines its contexts (on main the
    // OpenCL layer defined none: `queues.context` led nowhere).
    let contexts = sql(
        &trace,
        "for r in db.execute('''SELECT c.name, d.name FROM queues q JOIN devices c ON c.device = q.context
             AND c.is_context = 1 LEFT JOIN devices d ON d.device = c.parent AND d.is_context = 0
             ORDER BY q.id'''): print(*r, sep='|')",
    );
    let contexts: Vec<&str> = contexts.lines().collect();
    assert_eq!(contexts.len(), 4, "a context row for each queue's context: {contexts:?}");
    for c in &contexts {
        let (context, device) = c.split_once('|').expect("two columns");
        assert_eq!(context, format!("context of {device}"), "{contexts:?}");
    }
    let pocl_scale_end = trace_rows[0][1].end;
    let intel_write_start = trace_rows[1][0].start;
    assert!(
        intel_write_start > pocl_scale_end,
        "Intel's write waited on PoCL's kernel: starts {intel_write_start}, the kernel ended {pocl_scale_end}"
    );
}

/// `examples/opencl/two_devices.c`'s event wait lists are the trace's task graph: one edge per
/// wait-list entry (13: six per device, and Intel's first write waiting on the user event), from
/// the node of the command that made the waited event (or the user event's node) to the
/// waiting command's; each command's node is named as its device activity, on its queue (the
/// marker on the out-of-order queue → the map on the in-order one: the cross-queue edge), and
/// its id is its command's correlation with the top bit set. The report's longest chain runs
/// along them.
#[test]
fn two_devices_event_wait_lists_are_the_task_graphs_edges() {
    let dir = tempfile::tempdir().expect("tmp");
    let Some((trace, _)) = record_two_devices(dir.path()) else { return };
    // Each edge: source and target node names, their queues, the target's device.
    let rows = sql(
        &trace,
        "for r in db.execute('''SELECT s.name, t.name, s.queue_id, t.queue_id, d.name
             FROM task_graph e JOIN task_graph s ON s.op = 'node_create' AND s.node = e.source
             JOIN task_graph t ON t.op = 'node_create' AND t.node = e.target
             JOIN device_activity a ON a.correlation = (t.node & 0x7fffffffffffffff)
             JOIN devices d ON d.device = a.device
             WHERE e.op = 'edge_create' ORDER BY e.id'''): print(*r, sep='|')",
    );
    let mut edges: [Vec<(String, String)>; 2] = Default::default();
    for l in rows.lines() {
        let f: Vec<&str> = l.split('|').collect();
        let dev = usize::from(!f[4].contains("pthread"));
        let (source, target) = (f[0].to_string(), f[1].to_string());
        if source == "user event" {
            assert_eq!(f[2], "None", "a user event is on no queue: {rows}");
        } else if target == "map" {
            assert_ne!(f[2], f[3], "the marker is on the out-of-order queue, the map on the in-order one: {rows}");
        } else {
            assert_eq!(f[2], f[3], "{source} → {target} on one queue: {rows}");
        }
        edges[dev].push((source, target));
    }
    let program = [
        ("buffer_write", "scale"),
        ("scale", "buffer_copy"),
        ("buffer_fill", "buffer_copy"),
        ("buffer_copy", "add"),
        ("add", "marker"),
        ("marker", "map"),
    ];
    let want = |user: bool| -> Vec<(String, String)> {
        let first = user.then_some(("user event", "buffer_write"));
        first.into_iter().chain(program).map(|(s, t)| (s.to_string(), t.to_string())).collect()
    };
    assert_eq!(edges[0], want(false), "PoCL's wait lists: {rows}");
    assert_eq!(edges[1], want(true), "Intel's wait lists: {rows}");
    // Every command's node is its command: same correlation, name and queue.
    let unjoined = sql(
        &trace,
        "print(db.execute('''SELECT count(*) FROM task_graph t WHERE t.op = 'node_create' AND t.queue_id IS NOT NULL
             AND NOT EXISTS (SELECT 1 FROM device_activity a WHERE a.correlation = (t.node & 0x7fffffffffffffff)
             AND a.name = t.name AND a.queue_id = t.queue_id)''').fetchone()[0])",
    );
    assert_eq!(unjoined.trim(), "0", "command nodes without their command");
    let g = &report(&trace)["task_graph"];
    assert_eq!(
        (g["nodes"].as_u64(), g["edges"].as_u64(), g["unresolved_edges"].as_u64()),
        (Some(15), Some(13), Some(0)),
        "{g}"
    );
    assert_eq!(g["longest_chain_len"].as_u64(), Some(6), "{g}");
    let chain: Vec<&str> = g["longest_chain"].as_array().expect("chain").iter().filter_map(|n| n.as_str()).collect();
    assert_eq!(chain, ["buffer_write", "scale", "buffer_copy", "add", "marker", "map"], "{g}");
}

/// `examples/opencl/two_devices.c`'s wait lists in the timeline: its Perfetto export, read by
/// the repository's independent decoder (`scripts/review/check_pftrace.py --flows`), draws a
/// flow from the producer's device slice to the waiting command's for each of the 12 edges
/// between commands (6 per device, each on its device's queue tracks), none for the edge from
/// the user event (no slice), and every flow that starts ends; Chrome's export has the same 12
/// `dependency` flows, each `s` with its `f`.
#[test]
fn two_devices_wait_lists_are_flows_between_the_commands_in_perfetto_and_chrome() {
    let dir = tempfile::tempdir().expect("tmp");
    let Some((trace, _)) = record_two_devices(dir.path()) else { return };
    let pf = dir.path().join("two.pftrace");
    ok(&offtrace().arg("export").arg(&trace).args(["--format", "perfetto", "-o"]).arg(&pf).output().expect("export"));
    let check = Command::new("python3")
        .arg(workspace().join("scripts/review/check_pftrace.py"))
        .arg(&pf)
        .arg("--flows")
        .output()
        .expect("python3");
    ok(&check);
    let out = String::from_utf8_lossy(&check.stdout);
    let mut edges: [Vec<(String, String)>; 2] = Default::default();
    let mut launches = 0;
    for f in out.lines().filter_map(|l| l.strip_prefix("flow\t")).map(|l| l.split('\t').collect::<Vec<_>>()) {
        let [from_track, from, to_track, to] = f[..] else { panic!("{f:?}") };
        // A launch flow starts at an API call on the program's thread; a dependency flow on a
        // queue's track, under its device's.
        if !from_track.contains(" / queue ") {
            launches += 1;
            continue;
        }
        assert!(to_track.contains(" / queue "), "a dependency flow ends on a queue: {f:?}");
        let dev = usize::from(!from_track.contains("pthread"));
        assert_eq!(dev, usize::from(!to_track.contains("pthread")), "both ends on one device: {f:?}");
        edges[dev].push((from.to_string(), to.to_string()));
    }
    assert_eq!(launches, 18, "one launch flow per command: {out}");
    let mut want: Vec<(String, String)> = [
        ("buffer_write", "scale"),
        ("scale", "buffer_copy"),
        ("buffer_fill", "buffer_copy"),
        ("buffer_copy", "add"),
        ("add", "marker"),
        ("marker", "map"),
    ]
    .into_iter()
    .map(|(s, t)| (s.to_string(), t.to_string()))
    .collect();
    want.sort();
    for (dev, e) in edges.iter_mut().enumerate() {
        e.sort();
        assert_eq!(*e, want, "device {dev}'s dependency flows: {out}");
    }
    let json = dir.path().join("two.json");
    ok(&offtrace().arg("export").arg(&trace).args(["--format", "chrome", "-o"]).arg(&json).output().expect("export"));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).expect("json")).expect("JSON");
    let ids = |ph: &str| -> Vec<u64> {
        let mut ids: Vec<u64> = v["traceEvents"]
            .as_array()
            .expect("events")
            .iter()
            .filter(|e| e["ph"] == ph && e["name"] == "dependency")
            .map(|e| e["id"].as_u64().expect("id"))
            .collect();
        ids.sort_unstable();
        ids
    };
    assert_eq!(ids("s").len(), 12);
    assert_eq!(ids("s"), ids("f"), "each dependency flow's start has its end");
}

/// `examples/opencl/process_life.c` built into `dir`; None when OpenCL tests are skipped.
fn process_life(dir: &Path) -> Option<PathBuf> {
    opencl_program(dir, &workspace().join("examples/opencl/process_life.c"), "process_life", &["-O1"], &["-lpthread"])
}

/// A program that uses OpenCL and, while it is still recording, runs two children (fork and
/// exec of itself) that use OpenCL too: three traces, each with its own process's kernels
/// (the parent's 2, each child's 4), listed by `record`.
#[test]
fn a_program_and_the_children_it_forks_and_execs_keep_a_trace_each() {
    let dir = tempfile::tempdir().expect("tmp");
    let Some(prog) = process_life(dir.path()) else { return };
    let trace = dir.path().join("fork.offtrace");
    let o = offtrace()
        .arg("record")
        .arg("-o")
        .arg(&trace)
        .arg("--")
        .arg(&prog)
        .args(["fork", "2"])
        .env("OFFTRACE_CL_PLATFORM", "Portable")
        .output()
        .expect("record");
    ok(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("offtrace: 3 traces written, one per traced process:"), "{err}");
    let mut kernels = std::collections::BTreeMap::new();
    for e in std::fs::read_dir(dir.path()).expect("dir").filter_map(Result::ok) {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with("fork.offtrace") {
            continue;
        }
        let r = report(&e.path());
        let command = r["trace"]["info"]["command"].as_str().expect("command").to_owned();
        let mode = command.split_whitespace().nth(1).expect("mode").to_owned();
        let pid = r["trace"]["info"]["pid"].as_str().expect("pid").to_owned();
        assert!(err.contains(&format!("pid {pid}: ")), "record lists {name} (pid {pid}): {err}");
        let timed: u64 = r["device_activity"]
            .as_array()
            .expect("device_activity")
            .iter()
            .filter(|a| a["kind"] == "KERNEL_DISPATCH")
            .map(|a| a["device_count"].as_u64().expect("device_count"))
            .sum();
        *kernels.entry(mode).or_insert(0) += timed;
    }
    assert_eq!(kernels, [("child".to_owned(), 8), ("fork".to_owned(), 2)].into(), "{err}");
}

/// A worker thread calls `exit(0)` while two others still enqueue kernels (PoCL): the program
/// exits 0 as it does alone, and the trace ends cleanly (an `End` record: the layer's exit
/// handler ran on the exiting thread while the others kept calling) with the kernels' device
/// times, those whose completion never arrived counted apart.
#[test]
fn exit_from_a_worker_thread_while_others_enqueue_ends_the_trace_cleanly() {
    let dir = tempfile::tempdir().expect("tmp");
    let Some(prog) = process_life(dir.path()) else { return };
    let trace = dir.path().join("exit.offtrace");
    let o = offtrace()
        .arg("record")
        .arg("-o")
        .arg(&trace)
        .arg("--")
        .arg(&prog)
        .arg("exit-thread")
        .env("OFFTRACE_CL_PLATFORM", "Portable")
        .output()
        .expect("record");
    ok(&o);
    let stdout = String::from_utf8_lossy(&o.stdout);
    let enqueued: u64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("done exit-thread kernels "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("{stdout}"));
    let r = report(&trace);
    let row = r["device_activity"]
        .as_array()
        .expect("device_activity")
        .iter()
        .find(|a| a["kind"] == "KERNEL_DISPATCH")
        .unwrap_or_else(|| panic!("{}", r["device_activity"]))
        .clone();
    let (count, timed) = (row["count"].as_u64().expect("count"), row["device_count"].as_u64().expect("timed"));
    // The other threads go on enqueueing after the count was printed, until exit stops them.
    assert!(count >= enqueued && timed > 0 && timed <= count, "{row}: the program counted {enqueued}");
}

// ---- preload mode (`--opencl-interpose`, crates/offtrace-opencl/src/preload.rs) ---------------

/// `record --opencl-interpose MODE -o trace -- prog args`: the output and the report.
fn record_mode(
    mode: &str,
    trace: &Path,
    prog: &Path,
    args: &[&str],
    env: &[(&str, &OsStr)],
) -> (Output, serde_json::Value) {
    let mut cmd = offtrace();
    cmd.args(["record", "--opencl-interpose", mode, "-o"]).arg(trace).arg("--").arg(prog).args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let o = cmd.output().expect("record");
    ok(&o);
    let r = report(trace);
    (o, r)
}

/// Calls per operation.
fn calls_by_operation(r: &serde_json::Value) -> std::collections::BTreeMap<String, u64> {
    r["api_calls"]
        .as_array()
        .expect("api_calls")
        .iter()
        .map(|c| (c["operation"].as_str().expect("op").to_owned(), c["calls"].as_u64().expect("calls")))
        .collect()
}

/// Device activity rows: (kind, name, count, with device times).
fn activities(r: &serde_json::Value) -> Vec<(String, String, u64, u64)> {
    let mut v: Vec<_> = r["device_activity"]
        .as_array()
        .expect("device_activity")
        .iter()
        .map(|a| {
            (
                a["kind"].as_str().expect("kind").to_owned(),
                a["name"].as_str().expect("name").to_owned(),
                a["count"].as_u64().expect("count"),
                a["device_count"].as_u64().expect("device_count"),
            )
        })
        .collect();
    v.sort();
    v
}

/// The memory section without its times (allocations by type and device, frees).
fn memory(r: &serde_json::Value) -> serde_json::Value {
    let m = &r["memory"];
    serde_json::json!({
        "allocations": m["allocations"],
        "frees": m["frees"],
        "unmatched_frees": m["unmatched_frees"],
        "live_bytes_at_end": m["live_bytes_at_end"],
        "peak_live_bytes": m["peak_live_bytes"],
    })
}

/// The same program recorded through the loader's layer list and through `LD_PRELOAD` (on
/// Debian's ocl-icd, which supports layers: `record` keeps `OPENCL_LAYERS` in preload mode, so
/// this also shows that a loader's `clInitLayer` after the exports took the layer records
/// nothing twice): the same calls per operation, the same device activities all with device
/// times, the same memory records; the program's output and exit status unchanged.
#[test]
fn preload_mode_records_what_the_layer_records() {
    let dir = tempfile::tempdir().expect("tmp");
    let Some(prog) = vector_add(dir.path()) else { return };
    let args = ["--platform", "Portable"];
    let alone = Command::new(&prog).args(args).output().expect("run");
    ok(&alone);
    let (lo, layer) = record_mode("layer", &dir.path().join("layer.offtrace"), &prog, &args, &[]);
    let (po, preload) = record_mode("preload", &dir.path().join("preload.offtrace"), &prog, &args, &[]);
    assert_eq!(lo.stdout, alone.stdout);
    assert_eq!(po.stdout, alone.stdout);
    let perr = String::from_utf8_lossy(&po.stderr);
    assert!(perr.contains("OpenCL layer in preload mode (--opencl-interpose preload"), "{perr}");
    assert!(!String::from_utf8_lossy(&lo.stderr).contains("preload"), "layer mode says nothing");
    assert_eq!(preload["trace"]["info"]["opencl_interpose"], "preload", "the exports recorded, not the loader's layer");
    assert!(layer["trace"]["info"]["opencl_interpose"].is_null());
    let calls = calls_by_operation(&layer);
    assert!(calls.get("clEnqueueNDRangeKernel").is_some_and(|&n| n > 0), "{calls:?}");
    assert_eq!(calls_by_operation(&preload), calls);
    let acts = activities(&layer);
    assert!(!acts.is_empty() && acts.iter().all(|a| a.2 == a.3), "every command has device times: {acts:?}");
    assert_eq!(activities(&preload), acts);
    assert_eq!(memory(&preload), memory(&layer));
}

/// `cl_codeplay_performance_counters` in preload mode: the program finds the extension and its
/// counters (it checks them itself and says ok).
#[test]
fn codeplay_counters_work_in_preload_mode() {
    let dir = tempfile::tempdir().expect("tmp");
    let Some(prog) = opencl_program(
        dir.path(),
        &workspace().join("examples/opencl/codeplay_counters.c"),
        "codeplay_counters",
        &["-O1"],
        &[],
    ) else {
        return;
    };
    let (o, r) = record_mode("preload", &dir.path().join("cp.offtrace"), &prog, &[], &[]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("codeplay_counters: ok"), "{out}{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(r["trace"]["info"]["opencl_interpose"], "preload");
}

/// A `libOpenCL.so.1` without layer support, built here: every function Debian's ocl-icd exports
/// forwarded to it (`jmp` through a pointer looked up with `dlsym` at load), and no
/// `clInitLayer` anywhere in it, as CUDA's loader. As CUDA's loader it reads no layer list: it
/// takes `OPENCL_LAYERS` out of the environment before the ocl-icd behind it could read it.
/// Returns its folder.
fn loader_without_layers(dir: &Path) -> PathBuf {
    let real = Path::new("/usr/lib/x86_64-linux-gnu/libOpenCL.so.1");
    assert!(real.exists(), "Debian's ocl-icd is missing: run scripts/setup-opencl.sh");
    let nm = Command::new("nm").args(["-D", "--defined-only"]).arg(real).output().expect("nm");
    assert!(nm.status.success());
    let names: Vec<String> = String::from_utf8_lossy(&nm.stdout)
        .lines()
        .filter_map(|l| {
            l.split_whitespace()
                .nth(2)
                .filter(|_| l.contains(" T "))
                .map(|n| n.split('@').next().unwrap_or(n).to_owned())
        })
        .filter(|n| n.starts_with("cl") && !n.contains("Layer"))
        .collect();
    assert!(names.len() > 50 && names.iter().any(|n| n == "clGetPlatformIDs"), "{names:?}");
    let mut c = String::from("#define _GNU_SOURCE\n#include <dlfcn.h>\n#include <stdlib.h>\n");
    for n in &names {
        c += &format!(
            "__attribute__((visibility(\"hidden\"))) void *p_{n};\n__asm__(\".text\\n.globl {n}\\n.type {n},@function\\n{n}:\\n\\tjmp *p_{n}(%rip)\\n\");\n"
        );
    }
    c += &format!(
        "__attribute__((constructor)) static void forward(void) {{\n  unsetenv(\"OPENCL_LAYERS\");\n  void *h = dlopen(\"{}\", RTLD_NOW | RTLD_LOCAL);\n  if (!h) abort();\n",
        real.display()
    );
    for n in &names {
        c += &format!("  p_{n} = dlsym(h, \"{n}\");\n");
    }
    c += "}\n";
    let fake = dir.join("fake-loader");
    std::fs::create_dir_all(&fake).expect("dir");
    let src = fake.join("forward.c");
    std::fs::write(&src, c).expect("src");
    let lib = fake.join("libOpenCL.so.1");
    let st = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-Wl,-soname,libOpenCL.so.1", "-o"])
        .arg(&lib)
        .arg(&src)
        .arg("-ldl")
        .status()
        .expect("cc");
    assert!(st.success(), "cc of the forwarding loader failed");
    let bytes = std::fs::read(&lib).expect("read");
    assert!(!bytes.windows(11).any(|w| w == b"clInitLayer"), "the forwarding loader must not name clInitLayer");
    fake
}

/// A program whose `libOpenCL.so.1` (first in `LD_LIBRARY_PATH`, as CUDA's on a CUDA machine)
/// has no layer support: `record` chooses preload mode by itself and says so in one line, and
/// the trace holds what layer mode records with Debian's loader.
#[test]
fn a_loader_without_layer_support_gets_preload_mode() {
    let dir = tempfile::tempdir().expect("tmp");
    let Some(prog) = vector_add(dir.path()) else { return };
    let fake = loader_without_layers(dir.path());
    let args = ["--platform", "Portable"];
    let (_, layer) = record_mode("layer", &dir.path().join("layer.offtrace"), &prog, &args, &[]);
    let lp = fake.clone().into_os_string();
    let alone = Command::new(&prog).args(args).env("LD_LIBRARY_PATH", &lp).output().expect("run");
    ok(&alone);
    let (o, r) = record_mode("auto", &dir.path().join("auto.offtrace"), &prog, &args, &[("LD_LIBRARY_PATH", &lp)]);
    assert_eq!(o.stdout, alone.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    let line = format!(
        "offtrace: OpenCL layer in preload mode: the program's ICD loader {} has no layer support",
        fake.join("libOpenCL.so.1").canonicalize().expect("canon").display()
    );
    assert!(err.contains(&line), "{err}");
    assert_eq!(r["trace"]["info"]["opencl_interpose"], "preload");
    assert_eq!(calls_by_operation(&r), calls_by_operation(&layer));
    assert_eq!(activities(&r), activities(&layer));
    assert_eq!(memory(&r), memory(&layer));
    assert!(!err.contains("hint:"), "{err}");

    // The layer library alone (no SYCL runtime, no agent: what `record` preloads on a machine
    // without one), preloaded by hand in front of the same loader.
    let lib = Path::new(env!("CARGO_BIN_EXE_offtrace")).with_file_name("libofftrace_opencl.so");
    let alone_trace = dir.path().join("alone.offtrace");
    let o = Command::new(&prog)
        .args(args)
        .env("LD_LIBRARY_PATH", &lp)
        .env("LD_PRELOAD", &lib)
        .env("OFFTRACE_OUTPUT", &alone_trace)
        .output()
        .expect("run");
    ok(&o);
    assert_eq!(o.stdout, alone.stdout);
    let r = report(&alone_trace);
    assert_eq!(
        (&r["trace"]["info"]["backend"], &r["trace"]["info"]["opencl_interpose"]),
        (&"opencl".into(), &"preload".into())
    );
    assert_eq!(calls_by_operation(&r), calls_by_operation(&layer));
    assert_eq!(activities(&r), activities(&layer));
}

/// `offtrace metrics list` finds the layer's Codeplay counters also where the ICD loader it
/// loads has no layer support (CUDA's, first on a CUDA machine): its probe preloads the layer as
/// `record` does. Before, a listed layer only: no device, no `codeplay` group there.
#[test]
fn metrics_list_finds_the_codeplay_counters_behind_a_loader_without_layer_support() {
    let dir = tempfile::tempdir().expect("tmp");
    // vector_add: the same check that PoCL and a C compiler are here.
    if vector_add(dir.path()).is_none() {
        return;
    }
    let fake = loader_without_layers(dir.path());
    let groups = |lp: Option<&Path>| {
        let mut c = offtrace();
        c.args(["metrics", "list", "--format", "json"]);
        if let Some(lp) = lp {
            c.env("LD_LIBRARY_PATH", lp);
        }
        let o = c.output().expect("metrics list");
        ok(&o);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        let names: Vec<String> = v["groups"]
            .as_array()
            .expect("groups")
            .iter()
            .filter_map(|g| g["name"].as_str().map(str::to_owned))
            .collect();
        names
    };
    assert!(groups(None).iter().any(|g| g == "codeplay"), "Debian's loader, layer mode");
    let behind = groups(Some(&fake));
    assert!(behind.iter().any(|g| g == "codeplay"), "behind a loader without layers: {behind:?}");
}

/// A recording that holds no runtime call at all gets one hint line saying what that usually
/// means; a normal recording does not.
#[test]
fn a_recording_without_runtime_calls_gets_a_hint() {
    let dir = tempfile::tempdir().expect("tmp");
    let Some(prog) = vector_add(dir.path()) else { return };
    let o = offtrace().arg("record").arg("-o").arg(dir.path().join("none.offtrace")).args(["--", "true"]).output();
    let o = o.expect("record");
    ok(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    let hints: Vec<&str> =
        err.lines().filter(|l| l.starts_with("offtrace: hint: no SYCL, OpenCL or CUDA call was recorded")).collect();
    assert_eq!(hints.len(), 1, "{err}");
    assert!(hints[0].contains("--opencl-interpose preload"), "{err}");
    // In preload mode already: the hint must not send the user to preload mode.
    let o = offtrace()
        .arg("record")
        .arg("-o")
        .arg(dir.path().join("none-preload.offtrace"))
        .args(["--opencl-interpose", "preload", "--", "true"])
        .output()
        .expect("record");
    ok(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    let hints: Vec<&str> =
        err.lines().filter(|l| l.starts_with("offtrace: hint: no SYCL, OpenCL or CUDA call was recorded")).collect();
    assert_eq!(hints.len(), 1, "{err}");
    assert!(hints[0].contains("preload mode") && !hints[0].contains("--opencl-interpose preload"), "{err}");
    let o = offtrace()
        .arg("record")
        .arg("-o")
        .arg(dir.path().join("va.offtrace"))
        .arg("--")
        .arg(&prog)
        .args(["--platform", "Portable"])
        .output()
        .expect("record");
    ok(&o);
    assert!(!String::from_utf8_lossy(&o.stderr).contains("hint:"), "{}", String::from_utf8_lossy(&o.stderr));
}

/// pyopencl's bundled ocl-icd (`pyopencl/.libs/libOpenCL-<hash>.so`, its own soname) is opened
/// `RTLD_LOCAL` with the extension module: not in the global scope, not named `libOpenCL.so.1`.
/// Preload mode still finds it (the loaded objects' scan) and records what layer mode records.
#[test]
fn pyopencl_in_preload_mode_records_what_the_layer_records() {
    if std::env::var_os("OFFTRACE_SKIP_OPENCL").is_some_and(|v| v == "1") {
        return;
    }
    let venv = std::env::var_os("OFFTRACE_OPENCL_VENV").map_or_else(|| workspace().join(".venv-opencl"), PathBuf::from);
    let python = venv.join("bin/python");
    assert!(python.exists(), "no pyopencl venv at {}: run scripts/setup-opencl.sh", venv.display());
    let dir = tempfile::tempdir().expect("tmp");
    let script = workspace().join("examples/opencl/pyopencl_vadd.py");
    let script = script.to_str().expect("utf-8");
    let args = [script, "--platform", "Portable"];
    let (lo, layer) = record_mode("layer", &dir.path().join("layer.offtrace"), &python, &args, &[]);
    let (po, preload) = record_mode("preload", &dir.path().join("preload.offtrace"), &python, &args, &[]);
    assert_eq!(lo.stdout, po.stdout);
    assert_eq!(preload["trace"]["info"]["opencl_interpose"], "preload");
    let calls = calls_by_operation(&layer);
    assert!(calls.get("clEnqueueNDRangeKernel").is_some_and(|&n| n > 0), "{calls:?}");
    assert_eq!(calls_by_operation(&preload), calls);
    assert_eq!(activities(&preload), activities(&layer));
}
