//! The OpenCL layer's Codeplay performance counters (`cl_codeplay_performance_counters`,
//! crates/offtrace-opencl, docs/opencl.md) as an event-based metric group, [`GROUP`]: one group
//! per OpenCL device behind the layer, its metrics the counters the layer offers there, with the
//! specification's units.
//!
//! The values are collected by the layer itself, per command (it reads the counters around each
//! command of a queue that has them and emits them as the command's counter samples, named
//! `codeplay.<counter>`: the group's name and the metric's). `offtrace record --query-metrics
//! codeplay` asks the layer to enable every counter on every queue; the model's query pools do
//! not collect this group (it has no [`crate::Backend`]).
//!
//! Listing the group needs the layer loaded in front of an OpenCL runtime: [`probe`] loads the
//! ICD loader (`libOpenCL.so.1`) and asks each device for its counters
//! (`CL_DEVICE_PERFORMANCE_COUNTERS_CODEPLAY`). It initialises every OpenCL platform of the
//! machine, so it runs in a process of its own (`offtrace metrics list` starts one with
//! `OPENCL_LAYERS` naming the layer), never in a traced program. [`format_probe`] and
//! [`parse_probe`] carry its answer between the two, one line per device and counter.

#![allow(unsafe_code)] // dlopen/dlsym and calls into the OpenCL ICD loader

use std::ffi::{CStr, c_void};

use crate::model::{Calc, GroupInfo, MetricInfo, MetricType, SamplingTypes, ValueType};

/// The group's name, the prefix of the layer's counter names in a trace.
pub const GROUP: &str = "codeplay";
/// The extension the layer adds to each device's `CL_DEVICE_EXTENSIONS`.
pub const EXTENSION: &str = "cl_codeplay_performance_counters";

/// Whether `OFFTRACE_QUERY_METRICS`' entry `name` (`group` or `group@device`) is this group,
/// which the OpenCL layer collects (the agent and the CUDA backend leave it to the layer).
pub fn is_layer_group(name: &str) -> bool {
    name.trim().split('@').next() == Some(GROUP)
}

/// One counter of a device, as the layer describes it (`cl_performance_counter_codeplay`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeplayCounter {
    pub uuid: u32,
    pub name: String,
    pub category: String,
    pub description: String,
    /// `cl_performance_counter_unit_codeplay`.
    pub unit: u32,
    /// `cl_performance_counter_storage_codeplay`.
    pub storage: u32,
}

/// One OpenCL device behind the layer with its counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeplayDevice {
    pub platform: String,
    pub name: String,
    /// `cpu`, `gpu`, `accelerator` or `other` (`CL_DEVICE_TYPE`).
    pub kind: String,
    pub counters: Vec<CodeplayCounter>,
}

/// The text of a `cl_performance_counter_unit_codeplay` (as the layer writes it on its counters
/// in a trace): generic counts have none.
pub fn unit_text(unit: u32) -> &'static str {
    match unit {
        0x1 => "%",
        0x2 => "ns",
        0x3 => "bytes",
        0x4 => "bytes/s",
        0x5 => "K",
        0x6 => "W",
        0x7 => "V",
        0x8 => "A",
        0x9 => "Hz",
        0xA => "cycles",
        _ => "",
    }
}

impl CodeplayCounter {
    /// The counter as a metric of the model: its unit's text, its storage's value type.
    pub fn metric(&self) -> MetricInfo {
        let metric_type = match self.unit {
            0x2 => MetricType::Duration,
            0x4 => MetricType::Throughput,
            0x1 => MetricType::Ratio,
            _ => MetricType::Event,
        };
        let mut m = MetricInfo::new(
            &self.name,
            &self.description,
            &self.category,
            unit_text(self.unit),
            metric_type,
            Calc::Gauge(0),
        );
        // cl_performance_counter_storage_codeplay: INT32 0, INT64 1, UINT32 2, UINT64 3,
        // FLOAT32 4, FLOAT64 5.
        m.result_type = match self.storage {
            2 => ValueType::U32,
            4 => ValueType::F32,
            5 => ValueType::F64,
            _ => ValueType::U64,
        };
        m
    }
}

impl CodeplayDevice {
    /// The device's group, on metric device `device` (numbered by the caller after the
    /// catalog's devices).
    pub fn group(&self, device: u32) -> GroupInfo {
        GroupInfo {
            name: GROUP.to_owned(),
            description: format!(
                "OpenCL layer's Codeplay performance counters, per command ({}: {})",
                self.platform, self.name
            ),
            device,
            domain: 0,
            sampling: SamplingTypes::EVENT_BASED,
            metrics: self.counters.iter().map(CodeplayCounter::metric).collect(),
        }
    }
}

/// Tabs and line ends would split a line of the probe's answer.
fn field(s: &str) -> String {
    s.replace(['\t', '\n', '\r'], " ")
}

/// The probe's answer as text: a `device` line per device, then a `counter` line per counter.
pub fn format_probe(devices: &[CodeplayDevice]) -> String {
    let mut out = String::new();
    for d in devices {
        out.push_str(&format!("device\t{}\t{}\t{}\n", field(&d.kind), field(&d.platform), field(&d.name)));
        for c in &d.counters {
            out.push_str(&format!(
                "counter\t{}\t{}\t{}\t{}\t{}\t{}\n",
                c.uuid,
                c.unit,
                c.storage,
                field(&c.name),
                field(&c.category),
                field(&c.description)
            ));
        }
    }
    out
}

/// Reads [`format_probe`]'s text; lines it does not know are skipped.
pub fn parse_probe(text: &str) -> Vec<CodeplayDevice> {
    let mut out: Vec<CodeplayDevice> = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        match f.as_slice() {
            ["device", kind, platform, name] => out.push(CodeplayDevice {
                platform: (*platform).to_owned(),
                name: (*name).to_owned(),
                kind: (*kind).to_owned(),
                counters: Vec::new(),
            }),
            ["counter", uuid, unit, storage, name, category, description] => {
                let (Some(d), Ok(uuid), Ok(unit), Ok(storage)) =
                    (out.last_mut(), uuid.parse(), unit.parse(), storage.parse())
                else {
                    continue;
                };
                d.counters.push(CodeplayCounter {
                    uuid,
                    name: (*name).to_owned(),
                    category: (*category).to_owned(),
                    description: (*description).to_owned(),
                    unit,
                    storage,
                });
            }
            _ => {}
        }
    }
    out
}

type GetPlatformIds = unsafe extern "C" fn(u32, *mut *mut c_void, *mut u32) -> i32;
type GetDeviceIds = unsafe extern "C" fn(*mut c_void, u64, u32, *mut *mut c_void, *mut u32) -> i32;
type GetInfo = unsafe extern "C" fn(*mut c_void, u32, usize, *mut c_void, *mut usize) -> i32;

const CL_PLATFORM_NAME: u32 = 0x0902;
const CL_DEVICE_TYPE: u32 = 0x1000;
const CL_DEVICE_NAME: u32 = 0x102B;
const CL_DEVICE_EXTENSIONS: u32 = 0x1030;
const CL_DEVICE_PERFORMANCE_COUNTERS_CODEPLAY: u32 = 0x4260;
const CL_DEVICE_TYPE_ALL: u64 = 0xFFFF_FFFF;
/// `sizeof(cl_performance_counter_codeplay)`: unit, storage, uuid (`cl_uint` each), then name,
/// category and description (`char[256]` each).
const COUNTER_SIZE: usize = 12 + 3 * 256;

/// A `clGet*Info` answer of unknown size (`None` when the call fails).
fn info_bytes(get: GetInfo, object: *mut c_void, param: u32) -> Option<Vec<u8>> {
    let mut size = 0usize;
    // SAFETY: a size query (no value buffer) on a live object.
    if unsafe { get(object, param, 0, std::ptr::null_mut(), &mut size) } != 0 || size > 1 << 24 {
        return None;
    }
    let mut buf = vec![0u8; size];
    // SAFETY: `buf` holds the `size` bytes the runtime asked for.
    (unsafe { get(object, param, size, buf.as_mut_ptr().cast(), std::ptr::null_mut()) } == 0).then_some(buf)
}

fn c_text(b: &[u8]) -> String {
    CStr::from_bytes_until_nul(b)
        .map_or_else(|_| String::from_utf8_lossy(b).into_owned(), |c| c.to_string_lossy().into_owned())
}

/// The OpenCL devices of this process whose `CL_DEVICE_EXTENSIONS` name [`EXTENSION`], with
/// their counters. Empty when no ICD loader, platform or such device is found. Initialises
/// every OpenCL platform: call it in a process of its own (see the module's doc).
pub fn probe() -> Vec<CodeplayDevice> {
    // SAFETY: dlopen with a NUL-terminated name; null means absent. Never closed (a runtime
    // may have started threads into it).
    let lib = unsafe { libc::dlopen(c"libOpenCL.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if lib.is_null() {
        return Vec::new();
    }
    // The process's global scope first: where offtrace's layer is preloaded (a loader without
    // layer support, CUDA's), its exports are the OpenCL functions there, and a look-up in the
    // loader's own handle would pass them by; elsewhere only the handle has them.
    let sym = |n: &CStr| {
        // SAFETY: RTLD_DEFAULT or a live handle, and a NUL-terminated name.
        let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, n.as_ptr()) };
        let p = if p.is_null() { unsafe { libc::dlsym(lib, n.as_ptr()) } } else { p };
        (!p.is_null()).then_some(p)
    };
    let (Some(gp), Some(gd), Some(gpi), Some(gdi)) =
        (sym(c"clGetPlatformIDs"), sym(c"clGetDeviceIDs"), sym(c"clGetPlatformInfo"), sym(c"clGetDeviceInfo"))
    else {
        return Vec::new();
    };
    // SAFETY (the four transmutes): each symbol is the OpenCL function of that prototype
    // (cl.h), of pointer size.
    let (get_platforms, get_devices, platform_info, device_info) = unsafe {
        (
            std::mem::transmute::<*mut c_void, GetPlatformIds>(gp),
            std::mem::transmute::<*mut c_void, GetDeviceIds>(gd),
            std::mem::transmute::<*mut c_void, GetInfo>(gpi),
            std::mem::transmute::<*mut c_void, GetInfo>(gdi),
        )
    };
    let mut n = 0u32;
    // SAFETY: a count query with a valid out-pointer.
    if unsafe { get_platforms(0, std::ptr::null_mut(), &mut n) } != 0 || n == 0 {
        return Vec::new();
    }
    let mut platforms = vec![std::ptr::null_mut(); n.min(64) as usize];
    // SAFETY: room for `platforms.len()` handles.
    if unsafe { get_platforms(platforms.len() as u32, platforms.as_mut_ptr(), std::ptr::null_mut()) } != 0 {
        return Vec::new();
    }
    let mut out = Vec::new();
    for &p in &platforms {
        let platform = info_bytes(platform_info, p, CL_PLATFORM_NAME).map(|b| c_text(&b)).unwrap_or_default();
        let mut nd = 0u32;
        // SAFETY: a count query on a live platform.
        if unsafe { get_devices(p, CL_DEVICE_TYPE_ALL, 0, std::ptr::null_mut(), &mut nd) } != 0 || nd == 0 {
            continue;
        }
        let mut devices = vec![std::ptr::null_mut(); nd.min(256) as usize];
        // SAFETY: room for `devices.len()` handles.
        if unsafe {
            get_devices(p, CL_DEVICE_TYPE_ALL, devices.len() as u32, devices.as_mut_ptr(), std::ptr::null_mut())
        } != 0
        {
            continue;
        }
        for &d in &devices {
            let extensions = info_bytes(device_info, d, CL_DEVICE_EXTENSIONS).map(|b| c_text(&b)).unwrap_or_default();
            if !extensions.split_whitespace().any(|e| e == EXTENSION) {
                continue;
            }
            let name = info_bytes(device_info, d, CL_DEVICE_NAME).map(|b| c_text(&b)).unwrap_or_default();
            let kind = match info_bytes(device_info, d, CL_DEVICE_TYPE) {
                Some(b) if b.len() >= 8 => {
                    let t = u64::from_ne_bytes(b[..8].try_into().unwrap_or_default());
                    if t & 2 != 0 {
                        "cpu"
                    } else if t & 4 != 0 {
                        "gpu"
                    } else if t & 8 != 0 {
                        "accelerator"
                    } else {
                        "other"
                    }
                }
                _ => "other",
            };
            let raw = info_bytes(device_info, d, CL_DEVICE_PERFORMANCE_COUNTERS_CODEPLAY).unwrap_or_default();
            out.push(CodeplayDevice {
                platform: platform.clone(),
                name,
                kind: kind.to_owned(),
                counters: counters(&raw),
            });
        }
    }
    out
}

/// Reads an array of `cl_performance_counter_codeplay`.
fn counters(raw: &[u8]) -> Vec<CodeplayCounter> {
    raw.chunks_exact(COUNTER_SIZE)
        .map(|c| {
            let u = |i: usize| u32::from_ne_bytes([c[i], c[i + 1], c[i + 2], c[i + 3]]);
            CodeplayCounter {
                unit: u(0),
                storage: u(4),
                uuid: u(8),
                name: c_text(&c[12..268]),
                category: c_text(&c[268..524]),
                description: c_text(&c[524..780]),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device() -> CodeplayDevice {
        CodeplayDevice {
            platform: "Portable Computing Language".into(),
            name: "cpu-haswell\tAMD EPYC".into(),
            kind: "cpu".into(),
            counters: vec![
                CodeplayCounter {
                    uuid: 1,
                    name: "device_time".into(),
                    category: "timing".into(),
                    description: "END - START".into(),
                    unit: 2,
                    storage: 3,
                },
                CodeplayCounter {
                    uuid: 3,
                    name: "bandwidth".into(),
                    category: "memory".into(),
                    description: "bytes\nper second".into(),
                    unit: 4,
                    storage: 5,
                },
            ],
        }
    }

    #[test]
    fn the_probes_answer_reads_back() {
        let d = device();
        let back = parse_probe(&format_probe(std::slice::from_ref(&d)));
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].name, "cpu-haswell AMD EPYC", "a tab in a name does not split the line");
        assert_eq!(back[0].counters.len(), 2);
        assert_eq!(back[0].counters[1].description, "bytes per second");
        assert_eq!((back[0].counters[1].uuid, back[0].counters[1].unit, back[0].counters[1].storage), (3, 4, 5));
        assert!(parse_probe("garbage\ncounter\t1\t2\t3\tx\ty\tz\n").is_empty(), "a counter needs its device");
    }

    #[test]
    fn counters_are_metrics_with_the_specs_units() {
        let g = device().group(3);
        assert_eq!((g.name.as_str(), g.device, g.sampling), (GROUP, 3, SamplingTypes::EVENT_BASED));
        let m = &g.metrics;
        assert_eq!((m[0].name.as_str(), m[0].unit.as_str(), m[0].result_type), ("device_time", "ns", ValueType::U64));
        assert_eq!(
            (m[1].unit.as_str(), m[1].result_type, m[1].metric_type),
            ("bytes/s", ValueType::F64, MetricType::Throughput)
        );
        assert_eq!(unit_text(0), "");
        assert_eq!(unit_text(0xA), "cycles");
    }

    #[test]
    fn the_c_layout_is_read_field_by_field() {
        let mut raw = vec![0u8; 2 * COUNTER_SIZE];
        raw[0..4].copy_from_slice(&3u32.to_ne_bytes());
        raw[4..8].copy_from_slice(&3u32.to_ne_bytes());
        raw[8..12].copy_from_slice(&2u32.to_ne_bytes());
        raw[12..23].copy_from_slice(b"bytes_moved");
        raw[268..274].copy_from_slice(b"memory");
        raw[COUNTER_SIZE + 8] = 16;
        let c = counters(&raw[..2 * COUNTER_SIZE - 1]);
        assert_eq!(c.len(), 1, "a partial entry is not read");
        assert_eq!((c[0].uuid, c[0].name.as_str(), c[0].category.as_str()), (2, "bytes_moved", "memory"));
        assert_eq!(counters(&raw)[1].uuid, 16);
    }

    #[test]
    fn the_group_is_known_by_name() {
        assert!(is_layer_group("codeplay") && is_layer_group(" codeplay@3"));
        assert!(!is_layer_group("cpu.sw") && !is_layer_group("codeplay.x"));
    }
}
