//! Devices and contexts as `DEVICE` definitions, with the names and types the stream tells.
//!
//! Nothing here asks the runtime: names and types are learnt from what passes by — the
//! `sycl_device_name` / `sycl_device_type` metadata of SYCL queue and graph notifications, and
//! the results of `urDeviceGetInfo(UR_DEVICE_INFO_NAME / _TYPE)` calls the runtime or the
//! program makes. Each is defined once (a reader keeps one row per handle): a device when its
//! name is known, with the type known by then (the runtime asks for every device's type when it
//! enumerates them, before any name); a context, with its first device as parent and named after
//! it, once that device is defined. Handles are those every other record uses: UR device and context handles (the SYCL
//! metadata `sycl_device` / `sycl_context` carry the same values).

use std::collections::BTreeMap;
use std::ffi::CString;
use std::sync::Mutex;

use offtrace_core::{DevicePayload, DeviceType, Kind, Payload, Phase, device_op, emit_instant, kind_enabled};

#[derive(Default)]
struct DeviceInfo {
    name: Option<CString>,
    device_type: Option<DeviceType>,
    defined: bool,
}

#[derive(Default)]
struct Table {
    devices: BTreeMap<u64, DeviceInfo>,
    /// Contexts defined: context → (its first device, defined with that device's name).
    contexts: BTreeMap<u64, (u64, bool)>,
}

static TABLE: Mutex<Table> = Mutex::new(Table { devices: BTreeMap::new(), contexts: BTreeMap::new() });
/// Bounds the table (a program creating devices without end is not a case; this only caps it).
const MAX_DEVICES: usize = 4096;

/// `ur_device_type_t` → the services' device type.
pub fn ur_device_type(v: u32) -> DeviceType {
    match v {
        3 => DeviceType::Gpu,
        4 => DeviceType::Cpu,
        // FPGA, MCA, VPU
        5..=7 => DeviceType::Accelerator,
        _ => DeviceType::Unknown,
    }
}

/// SYCL's `sycl_device_type` metadata (`"CPU"`, `"GPU"`, `"ACCELERATOR"`, `"HOST"`, ...).
pub fn sycl_device_type(text: &[u8]) -> Option<DeviceType> {
    match text {
        b"CPU" | b"cpu" | b"HOST" | b"host" => Some(DeviceType::Cpu),
        b"GPU" | b"gpu" => Some(DeviceType::Gpu),
        b"ACCELERATOR" | b"accelerator" | b"FPGA" | b"fpga" | b"custom" | b"CUSTOM" => Some(DeviceType::Accelerator),
        _ => None,
    }
}

/// What is known of `device`: its name (bytes, up to a NUL if any; empty = not told here) and
/// type. Emits its definition when the name is first known.
pub fn learn_device(device: u64, name: &[u8], device_type: Option<DeviceType>) {
    if device == 0 || !kind_enabled(Kind::Device) {
        return;
    }
    let mut t = TABLE.lock().unwrap_or_else(|e| e.into_inner());
    if !t.devices.contains_key(&device) && t.devices.len() >= MAX_DEVICES {
        return;
    }
    let d = t.devices.entry(device).or_default();
    if d.name.is_none() && !name.is_empty() {
        let end = name.iter().position(|&c| c == 0).unwrap_or(name.len());
        d.name = CString::new(&name[..end]).ok().filter(|n| !n.as_bytes().is_empty());
    }
    if d.device_type.is_none() {
        d.device_type = device_type.filter(|&t| t != DeviceType::Unknown);
    }
    if d.defined || d.name.is_none() {
        return;
    }
    d.defined = true;
    let (name, device_type) = (d.name.clone(), d.device_type.unwrap_or(DeviceType::Unknown));
    // Contexts waiting for this device's name.
    let waiting: Vec<u64> =
        t.contexts.iter().filter(|(_, (dev, done))| *dev == device && !*done).map(|(&c, _)| c).collect();
    // Emitted after the lock is released: a tool's callback may use the runtime again.
    drop(t);
    let p = DevicePayload {
        handle: device,
        parent: 0,
        name: name.as_ref().map_or(std::ptr::null(), |n| n.as_ptr()),
        device_type,
    };
    emit_instant(Kind::Device, device_op::DEVICE, Phase::None, Payload::Device(&p));
    for context in waiting {
        learn_context(context, device);
    }
}

/// A context and a device it holds (the first one seen becomes its parent): defined once that
/// device has its name (`context of <device>`); until then only remembered.
pub fn learn_context(context: u64, device: u64) {
    if context == 0 || !kind_enabled(Kind::Device) {
        return;
    }
    let mut t = TABLE.lock().unwrap_or_else(|e| e.into_inner());
    let device_name = |t: &Table, device: u64| {
        t.devices
            .get(&device)
            .and_then(|d| d.name.as_ref())
            .and_then(|n| CString::new(format!("context of {}", n.to_string_lossy())).ok())
    };
    let device = match t.contexts.get(&context).copied() {
        Some((_, true)) => return,
        Some((first, false)) => first,
        None if t.contexts.len() >= MAX_DEVICES => return,
        None => device,
    };
    let name = device_name(&t, device);
    t.contexts.insert(context, (device, name.is_some()));
    let Some(name) = name else { return };
    drop(t);
    let p = DevicePayload { handle: context, parent: device, name: name.as_ptr(), device_type: DeviceType::Unknown };
    emit_instant(Kind::Device, device_op::CONTEXT, Phase::None, Payload::Device(&p));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_types_from_ur_and_sycl() {
        assert_eq!(ur_device_type(4), DeviceType::Cpu);
        assert_eq!(ur_device_type(3), DeviceType::Gpu);
        assert_eq!(ur_device_type(5), DeviceType::Accelerator);
        assert_eq!(ur_device_type(1), DeviceType::Unknown, "DEFAULT is no type");
        assert_eq!(sycl_device_type(b"CPU"), Some(DeviceType::Cpu));
        assert_eq!(sycl_device_type(b"GPU"), Some(DeviceType::Gpu));
        assert_eq!(sycl_device_type(b"?"), None);
    }

    /// Definitions come when the name is known, once more when the type follows, then never.
    #[test]
    fn a_device_is_defined_when_named_and_completed_once() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicU64, Ordering};
        let seen = Arc::new(Mutex::new(Vec::new()));
        let count = Arc::new(AtomicU64::new(0));
        let ctx = offtrace_core::create_context().expect("context");
        let (s, c) = (seen.clone(), count.clone());
        offtrace_core::configure_callback_tracing_closure(ctx, Kind::Device, None, move |r, _| {
            c.fetch_add(1, Ordering::Relaxed);
            s.lock().unwrap_or_else(|e| e.into_inner()).push(r.operation);
        })
        .expect("configure");
        offtrace_core::start_context(ctx).expect("start");
        let dev = 0xd00d_0000;
        learn_device(dev, b"", Some(DeviceType::Cpu)); // no name yet: nothing
        learn_device(dev, b"My CPU\0junk", None); // named (type known already): one definition
        learn_device(dev, b"Other", Some(DeviceType::Gpu)); // nothing new
        learn_context(0xc0_0000, dev);
        learn_context(0xc0_0000, dev);
        learn_context(0xc1_0000, 0xd11d_0000); // its device has no name yet: nothing
        learn_device(0xd11d_0000, b"Late", None); // named: the context waiting for it follows
        learn_context(0xc1_0000, 0xd11d_0000); // nothing new
        let t = TABLE.lock().unwrap_or_else(|e| e.into_inner());
        let d = &t.devices[&dev];
        assert_eq!(d.name.as_deref(), Some(c"My CPU"));
        assert_eq!(d.device_type, Some(DeviceType::Cpu));
        drop(t);
        offtrace_core::destroy_context(ctx).expect("destroy");
        let ops = [device_op::DEVICE, device_op::CONTEXT, device_op::DEVICE, device_op::CONTEXT];
        assert_eq!(*seen.lock().unwrap_or_else(|e| e.into_inner()), ops);
    }
}
