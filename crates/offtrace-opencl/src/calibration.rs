//! Device clock → trace clock (CLOCK_MONOTONIC nanoseconds), per device.
//!
//! A calibration sample is a device timestamp `d` known to have been taken between two host
//! readings `h0 <= h1` of CLOCK_MONOTONIC: the offset `host - device` then lies in
//! `[h0 - d, h1 - d]`. Two sources of samples, tried in this order:
//!
//! 1. `clGetDeviceAndHostTimer` (OpenCL 2.1) bracketed by two CLOCK_MONOTONIC reads, taken when
//!    the first queue of the device is created (the best of three tries: narrowest bracket).
//!    Intel's CPU runtime has it; PoCL 3.1 returns `CL_INVALID_OPERATION`.
//! 2. Otherwise (method "queued"), three markers of the layer's own on the device's first queue
//!    ([`calibrate_device`]), then every completed command's
//!    `CL_PROFILING_COMMAND_QUEUED` timestamp, which the runtime takes inside the enqueue call,
//!    bracketed by the host times just before and after that call. A narrower bracket wins; an
//!    old calibration is refreshed (below).
//!
//! The offset is the bracket's midpoint; its half width is the calibration's uncertainty
//! (`calibrations()`). Both go into the trace as counter samples of the device
//! (`opencl.clock_offset_ns`, `opencl.clock_uncertainty_ns`) whenever they change. No rate is
//! fitted; a "queued" calibration follows a device clock that wanders against the host's
//! instead: once it is [`REFRESH_NS`] old, the next bracket no wider than [`REFRESH_MAX_HALF_NS`]
//! replaces it, narrower or not. PoCL's CLOCK_MONOTONIC_RAW moves against CLOCK_MONOTONIC only
//! by NTP's slew.
//!
//! A QUEUED timestamp is not always taken inside the enqueue call: NVIDIA's OpenCL stamps a
//! command that waits for an event not yet complete (a user event, another queue's command)
//! when it is released to the device, milliseconds after its enqueue returned. Its bracket may
//! be the narrowest of the run, and taken at face value it put the commands after it up to 2 ms
//! before their own enqueue (H100 host, `ooo_threads`); NVIDIA's device clock itself (counted
//! from 1970, CLOCK_REALTIME + about 0.1 ms there) kept within 11 µs of CLOCK_MONOTONIC over
//! 3.5 s. So every completed command also bounds the offset from below: its device START cannot
//! come before the host time its enqueue began, `offset >= host_before - start` ([`Floor`]).
//! A sample whose whole bracket lies below the device's floor is refused (the floor loosened by
//! [`FLOOR_DRIFT_PPM`] of its age, for a clock that does wander), a midpoint below it is
//! raised to it, and a command that the current offset would place before its enqueue raises
//! the offset to its bound ([`raise`]) before it is converted: no command starts before its
//! enqueue in the trace.

use rustc_hash::FxHashMap as HashMap;
use std::ffi::c_void;
use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::api::next;
use crate::call::CL_SUCCESS;

/// How a device's offset was measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    DeviceAndHostTimer,
    Queued,
}

/// One device's calibration: trace time = device time + `offset_ns` (± `uncertainty_ns`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Calibration {
    pub device: u64,
    pub method: Method,
    pub offset_ns: i64,
    pub uncertainty_ns: u64,
    /// The device's number in calibration order (names its trace counters).
    pub ordinal: u64,
    /// The host time at the end of the bracket that set it (CLOCK_MONOTONIC ns).
    pub at_ns: u64,
    /// The highest lower bound of the offset known so far (completed commands' starts).
    pub floor: Floor,
}

/// A lower bound of a device's offset: some completed command's `host_before - start` (its
/// START on the device cannot precede the host time its enqueue began), the highest seen, with
/// the host time it was seen at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Floor {
    pub offset_ns: i64,
    pub at_ns: u64,
}

impl Floor {
    pub const NONE: Floor = Floor { offset_ns: i64::MIN, at_ns: 0 };

    /// The bound at host time `now`: loosened by [`FLOOR_DRIFT_PPM`] of its age, since a device
    /// clock may wander against the host's after it was seen.
    fn at(self, now: u64) -> i64 {
        if self.offset_ns == i64::MIN {
            return i64::MIN;
        }
        let age = now.saturating_sub(self.at_ns);
        self.offset_ns.saturating_sub((age / 1_000_000).saturating_mul(FLOOR_DRIFT_PPM) as i64)
    }

    /// The higher of two bounds, each taken at `now`.
    fn max_at(self, other: Floor, now: u64) -> Floor {
        if other.at(now) > self.at(now) { other } else { self }
    }

    /// Adds the bound `bound` of a command enqueued by host time `now` (a harvest's running
    /// maximum: a harvest is short, so its floor is not loosened within it).
    #[inline]
    pub(crate) fn note(&mut self, bound: i64, now: u64) {
        if bound > self.offset_ns {
            *self = Floor { offset_ns: bound, at_ns: now };
        }
    }
}

/// How far (parts per million of its age) a device clock is allowed to have wandered since a
/// floor was seen: NTP slews CLOCK_MONOTONIC by at most 500 ppm, and the clocks measured here
/// kept within 15 ppm; 100 still refuses a QUEUED stamp 2 ms late after 10 s.
pub const FLOOR_DRIFT_PPM: u64 = 100;

/// How old a "queued" calibration may grow before a wider bracket may replace it.
pub const REFRESH_NS: u64 = 20_000_000;
/// The widest bracket (half width) that may replace a calibration older than [`REFRESH_NS`]:
/// an enqueue call of a few microseconds gives one at once; a slow one (a first call, a
/// blocking one) waits for the next.
pub const REFRESH_MAX_HALF_NS: u64 = 50_000;

/// Whether a bracket of half width `half` around host time `h1` (its start `h0`) should replace
/// `c`: a narrower one not older than `c` by more than [`REFRESH_NS`], or, once `c` is that old,
/// any one no wider than [`REFRESH_MAX_HALF_NS`] (or than `c`).
fn replaces(c: &Calibration, h0: u64, h1: u64, half: u64) -> bool {
    if h0 > c.at_ns.saturating_add(REFRESH_NS) {
        return half <= REFRESH_MAX_HALF_NS.max(c.uncertainty_ns);
    }
    half < c.uncertainty_ns && h1.saturating_add(REFRESH_NS) >= c.at_ns
}

static DEVICES: RwLock<Option<HashMap<u64, Calibration>>> = RwLock::new(None);
/// Bumped after every change of `DEVICES` (under its write lock), so that a harvest can keep the
/// calibration it read for its batch ([`Cached`]) and know when it changed.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// The calibration a harvest read last (one device's, with the [`GENERATION`] it was read at):
/// a batch's commands are mostly of one device, and a calibration changes rarely, so most
/// completions take it from here with one atomic load instead of the read lock and a map
/// look-up (about 60 instructions per command).
#[derive(Debug)]
pub(crate) struct Cached {
    generation: u64,
    device: u64,
    calibration: Option<Calibration>,
    /// The floor of the commands this harvest converted (of `device`).
    pub(crate) floor: Floor,
}

impl Default for Cached {
    fn default() -> Self {
        Self { generation: u64::MAX, device: 0, calibration: None, floor: Floor::NONE }
    }
}

impl Cached {
    /// `device`'s calibration now, as [`current`].
    pub(crate) fn get(&mut self, device: u64) -> Option<Calibration> {
        // Acquire: pairs with the Release bump after a change; a value read under the read lock
        // after this load is at least as new as the generation it is kept with (a change after
        // the load bumps the generation again, and the next call reads the map again).
        let generation = GENERATION.load(Ordering::Acquire);
        if generation != self.generation || device != self.device {
            if device != self.device {
                self.floor = Floor::NONE;
            }
            self.calibration = current(device);
            self.generation = generation;
            self.device = device;
        }
        self.calibration
    }
}

/// Every device's current calibration.
pub fn calibrations() -> Vec<Calibration> {
    DEVICES
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .map(|m| m.values().copied().collect())
        .unwrap_or_default()
}

/// The interval `[h0 - d, h1 - d]` as (midpoint, half width).
fn bracket(h0: u64, h1: u64, d: u64) -> (i64, u64) {
    let lo = h0 as i128 - d as i128;
    let hi = h1 as i128 - d as i128;
    (((lo + hi) / 2) as i64, ((hi - lo) / 2) as u64)
}

fn offer(device: u64, method: Method, h0: u64, h1: u64, d: u64) {
    offer_above(device, method, h0, h1, d, Floor::NONE);
}

/// [`offer`], with a floor the caller knows of (its harvest's) beside the device's own: a
/// bracket wholly below the higher of the two is refused, a midpoint below it raised to it.
fn offer_above(device: u64, method: Method, h0: u64, h1: u64, d: u64, known: Floor) {
    if h1 < h0 || d == 0 {
        return;
    }
    let (mut offset_ns, uncertainty_ns) = bracket(h0, h1, d);
    let installed = {
        let mut g = DEVICES.write().unwrap_or_else(|e| e.into_inner());
        let m = g.get_or_insert_with(HashMap::default);
        let floor = m.get(&device).map_or(Floor::NONE, |c| c.floor).max_at(known, h1);
        let lowest = floor.at(h1);
        if method == Method::Queued && (h1 as i128 - d as i128) < lowest as i128 {
            // Stamped after its enqueue returned (a command that waited for an event).
            if let Some(c) = m.get_mut(&device) {
                c.floor = floor;
            }
            return;
        }
        offset_ns = offset_ns.max(lowest);
        match m.get(&device) {
            // A timer calibration is never replaced by a queued one; a narrower bracket of the
            // same method replaces a wider one.
            Some(c) if c.method == Method::DeviceAndHostTimer && method == Method::Queued => None,
            Some(c) if c.method == Method::DeviceAndHostTimer && c.uncertainty_ns <= uncertainty_ns => None,
            Some(c)
                if c.method == Method::Queued && method == Method::Queued && !replaces(c, h0, h1, uncertainty_ns) =>
            {
                None
            }
            _ => {
                let ordinal = m.len() as u64;
                let ordinal = m.get(&device).map_or(ordinal, |c| c.ordinal);
                let c = Calibration { device, method, offset_ns, uncertainty_ns, ordinal, at_ns: h1, floor };
                m.insert(device, c);
                // Release: under the write lock, after the change; see `Cached::get`.
                GENERATION.fetch_add(1, Ordering::Release);
                Some(c)
            }
        }
    };
    if let Some(c) = installed {
        record(&c);
    }
}

/// Records a calibration in the trace: two counters per device, `opencl.clock_offset_ns`
/// (trace − device, signed) and `opencl.clock_uncertainty_ns`, defined at the device's first
/// calibration and sampled at each change, so a reader can tell how each device time was
/// converted and how well.
fn record(c: &Calibration) {
    use offtrace_core::{CounterPayload, CounterValueType, Kind, Payload, Phase, counter_op, emit_instant};
    if !offtrace_core::kind_enabled(Kind::Counter) {
        return;
    }
    let first = DEFINED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(HashMap::default)
        .insert(c.device, ())
        .is_none();
    if first {
        crate::objects::define_device(c.device as *mut std::ffi::c_void, std::ptr::null_mut());
    }
    let base = 0xC10C_0000_0000 + 2 * c.ordinal;
    let series = [
        (base, c"opencl.clock_offset_ns", CounterValueType::I64, c.offset_ns as u64),
        (base + 1, c"opencl.clock_uncertainty_ns", CounterValueType::U64, c.uncertainty_ns),
    ];
    for (id, name, ty, value) in series {
        let mut p = CounterPayload {
            counter: id,
            device: c.device,
            value: ty as u64,
            name: name.as_ptr(),
            unit: c"ns".as_ptr(),
            ts: 0,
        };
        if first {
            emit_instant(Kind::Counter, counter_op::DEFINE, Phase::None, Payload::Counter(&p));
        }
        p.value = value;
        emit_instant(Kind::Counter, counter_op::SAMPLE, Phase::None, Payload::Counter(&p));
    }
}

static DEFINED: std::sync::Mutex<Option<HashMap<u64, ()>>> = std::sync::Mutex::new(None);

/// Calibrates `device` if it has no calibration yet: with `clGetDeviceAndHostTimer` where the
/// device has it, else with three markers on `queue` (just created, so empty; profiling is on),
/// whose QUEUED timestamps are bracketed by host reads around each enqueue. The markers are the
/// layer's own (never traced) and are waited for here, once per device, before the program's
/// first command: a few tens of µs at queue creation.
pub(crate) fn calibrate_device(device: *mut c_void, queue: *mut c_void) {
    calibrate_with_timer(device);
    let known =
        DEVICES.read().unwrap_or_else(|e| e.into_inner()).as_ref().is_some_and(|m| m.contains_key(&(device as u64)));
    if known || queue.is_null() {
        return;
    }
    let n = next();
    let (Some(marker), Some(wait), Some(release)) =
        (n.clEnqueueMarkerWithWaitList, n.clWaitForEvents, n.clReleaseEvent)
    else {
        return;
    };
    for _ in 0..3 {
        let mut ev: *mut c_void = std::ptr::null_mut();
        let h0 = offtrace_core::clock::monotonic_ns();
        // SAFETY: a valid queue just created by the runtime; an event out pointer.
        let r = unsafe { marker(queue, 0, std::ptr::null_mut(), (&raw mut ev).cast()) };
        let h1 = offtrace_core::clock::monotonic_ns();
        if r != CL_SUCCESS || ev.is_null() {
            return;
        }
        // SAFETY: one valid event, released once below.
        unsafe { wait(1, (&raw mut ev).cast()) };
        if let Some(q) = crate::enqueue::profiling(ev, crate::call::CL_PROFILING_COMMAND_QUEUED) {
            observe_queued(device as u64, q, h0, h1, Floor::NONE);
        }
        // SAFETY: the layer's own event.
        unsafe { release(ev) };
    }
}

fn calibrate_with_timer(device: *mut c_void) {
    if device.is_null() {
        return;
    }
    let known =
        DEVICES.read().unwrap_or_else(|e| e.into_inner()).as_ref().is_some_and(|m| m.contains_key(&(device as u64)));
    if known {
        return;
    }
    let Some(timer) = next().clGetDeviceAndHostTimer else { return };
    for _ in 0..3 {
        let (mut d, mut h) = (0u64, 0u64);
        let h0 = offtrace_core::clock::monotonic_ns();
        // SAFETY: a valid device handle (the one a queue was just created on) and two u64 outs.
        #[allow(unsafe_code)]
        let r = unsafe { timer(device, (&raw mut d).cast(), (&raw mut h).cast()) };
        let h1 = offtrace_core::clock::monotonic_ns();
        if r != CL_SUCCESS {
            return;
        }
        offer(device as u64, Method::DeviceAndHostTimer, h0, h1, d);
    }
}

/// A completed command's QUEUED timestamp, taken during an enqueue that ran between host times
/// `h0` and `h1`.
/// `known`: the floor of the caller's harvest (see [`Floor`]).
pub(crate) fn observe_queued(device: u64, queued: u64, h0: u64, h1: u64, known: Floor) {
    let g = DEVICES.read().unwrap_or_else(|e| e.into_inner());
    let better = match g.as_ref().and_then(|m| m.get(&device)) {
        Some(c) => c.method == Method::Queued && replaces(c, h0, h1, bracket(h0, h1, queued).1),
        None => true,
    };
    drop(g);
    if better {
        offer_above(device, Method::Queued, h0, h1, queued, known);
    }
}

/// A completed command that the device's offset would place before its enqueue began: raises
/// the offset to the command's bound `floor` (a harvest's [`Floor`], which holds it), so that
/// it and the commands after it start no earlier than their enqueue. Any method: a device
/// timer's reading, too, is only as good as what it is checked against.
#[cold]
pub(crate) fn raise(device: u64, floor: Floor) {
    let installed = {
        let mut g = DEVICES.write().unwrap_or_else(|e| e.into_inner());
        let Some(c) = g.as_mut().and_then(|m| m.get_mut(&device)) else { return };
        c.floor = c.floor.max_at(floor, floor.at_ns);
        if c.offset_ns >= floor.offset_ns {
            return;
        }
        c.offset_ns = floor.offset_ns;
        // Release: under the write lock, after the change; see `Cached::get`.
        GENERATION.fetch_add(1, Ordering::Release);
        *c
    };
    record(&installed);
}

/// The device's calibration now (one read lock), `None` before its first.
pub(crate) fn current(device: u64) -> Option<Calibration> {
    DEVICES.read().unwrap_or_else(|e| e.into_inner()).as_ref().and_then(|m| m.get(&device).copied())
}

/// Whether a command enqueued between the host times `h0` and `h1` could replace `calibration`
/// with its QUEUED timestamp: only for the "queued" method, when its bracket is narrower or the
/// calibration has grown old ([`replaces`]). The bracket's width is `h1 - h0` whatever the
/// timestamp, so this is known before the timestamp is queried: most completions skip the query
/// (the outcome is the same as offering every one, see `observe_queued`); a device whose
/// calibration is old costs one query every [`REFRESH_NS`] or so.
pub(crate) fn could_improve(calibration: Option<&Calibration>, h0: u64, h1: u64) -> bool {
    match calibration {
        None => true,
        Some(c) => c.method == Method::Queued && h1 >= h0 && replaces(c, h0, h1, (h1 - h0) / 2),
    }
}

/// A device timestamp in the trace clock (unchanged when the device has no calibration yet).
#[cfg(test)]
pub(crate) fn to_trace(device: u64, device_ns: u64) -> u64 {
    apply(current(device).map_or(0, |c| c.offset_ns), device_ns)
}

/// `device_ns` shifted by `offset`.
pub(crate) fn apply(offset: i64, device_ns: u64) -> u64 {
    (device_ns as i64).wrapping_add(offset) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A completion queries its QUEUED timestamp only when its bracket is narrower than the
    /// calibration's, which is what `observe_queued` would accept.
    #[test]
    fn only_a_narrower_bracket_could_improve_a_queued_calibration() {
        let queued = Calibration {
            device: 1,
            method: Method::Queued,
            offset_ns: 5,
            uncertainty_ns: 50,
            ordinal: 0,
            at_ns: 1_000,
            floor: Floor::NONE,
        };
        assert!(could_improve(None, 1_000, 5_000));
        assert!(could_improve(Some(&queued), 1_000, 1_099), "half width 49 < 50");
        assert!(!could_improve(Some(&queued), 1_000, 1_100), "half width 50, not narrower");
        assert!(!could_improve(Some(&queued), 1_000, 999), "host times out of order");
        let timer = Calibration { method: Method::DeviceAndHostTimer, ..queued };
        assert!(!could_improve(Some(&timer), 1_000, 1_000));
        // The same decision `observe_queued` takes with the timestamp in hand.
        for (h0, h1) in [(1_000, 1_099), (1_000, 1_100), (1_000, 1_101)] {
            assert_eq!(could_improve(Some(&queued), h0, h1), bracket(h0, h1, 700).1 < queued.uncertainty_ns);
        }
    }

    /// A harvest's kept calibration follows every change of the device's and never answers
    /// for another device.
    #[test]
    fn a_kept_calibration_is_read_again_after_a_change() {
        let mut cached = Cached::default();
        assert_eq!(cached.get(31), None, "no calibration yet");
        observe_queued(31, 500, 1_000, 1_200, Floor::NONE); // offset 600 ± 100
        assert_eq!(cached.get(31).map(|c| c.offset_ns), Some(600));
        assert_eq!(cached.get(32), None, "another device");
        observe_queued(31, 500, 1_050, 1_070, Floor::NONE); // 560 ± 10
        assert_eq!(cached.get(31).map(|c| c.offset_ns), Some(560));
        observe_queued(32, 100, 1_000, 1_000, Floor::NONE); // device 32: 900 ± 0
        assert_eq!(cached.get(31).map(|c| c.offset_ns), Some(560));
        assert_eq!(cached.get(32).map(|c| c.offset_ns), Some(900));
        offer(31, Method::DeviceAndHostTimer, 2_000, 2_400, 1_000); // 1200 ± 200: timer wins
        assert_eq!(cached.get(31), current(31));
        assert_eq!(cached.get(31).map(|c| c.offset_ns), Some(1_200));
    }

    /// A device clock that wanders: once the calibration is older than REFRESH_NS a bracket
    /// no wider than REFRESH_MAX_HALF_NS replaces it, narrower or not; before that only a
    /// narrower one does, and a narrower one from long before it never does.
    #[test]
    fn an_old_queued_calibration_follows_the_device_clock() {
        let t0 = 1_000_000_000;
        observe_queued(41, 1_000, t0, t0 + 200, Floor::NONE); // offset t0 - 900 ± 100
        let first = current(41).expect("calibrated");
        assert_eq!((first.offset_ns, first.uncertainty_ns, first.at_ns), (t0 as i64 - 900, 100, t0 + 200));
        // Soon after, a wider bracket (± 2 µs) does not replace it, whatever its offset.
        let soon = t0 + REFRESH_NS / 2;
        assert!(!could_improve(Some(&first), soon, soon + 4_000));
        observe_queued(41, 5_000, soon, soon + 4_000, Floor::NONE);
        assert_eq!(current(41), Some(first));
        // Once it is old, the same width does: the device clock moved by 1 ms meanwhile.
        let late = t0 + REFRESH_NS + 1_000;
        assert!(could_improve(Some(&first), late, late + 4_000));
        observe_queued(41, late - t0 + 1_000 - 1_000_000, late, late + 4_000, Floor::NONE);
        let moved = current(41).expect("calibrated");
        assert_eq!((moved.offset_ns, moved.uncertainty_ns, moved.at_ns), (t0 as i64 + 1_001_000, 2_000, late + 4_000));
        // Too wide a bracket waits for a better one, however old the calibration.
        let later = moved.at_ns + 2 * REFRESH_NS;
        assert!(!could_improve(Some(&moved), later, later + 2 * REFRESH_MAX_HALF_NS + 2));
        // A narrower bracket from long before the calibration (a command harvested late) does not
        // take it back.
        assert!(!could_improve(Some(&moved), t0, t0 + 2));
        assert!(could_improve(Some(&moved), moved.at_ns - 10, moved.at_ns - 8), "narrower and recent");
    }

    /// NVIDIA's OpenCL stamps QUEUED when a command that waited for an event is released to
    /// the device, after its enqueue returned: such a stamp, though its bracket is the
    /// narrowest, is refused by the floor the completed commands set, and a command the offset
    /// would place before its enqueue raises the offset.
    #[test]
    fn a_queued_stamp_taken_after_its_enqueue_is_refused_and_no_command_starts_before_it() {
        let t0: u64 = 5_000_000_000;
        let o = t0 as i64 - 1_000; // the true offset: host = device + o
        observe_queued(51, 1_000, t0, t0 + 20, Floor::NONE); // o + 10 ± 10
        assert_eq!(current(51).map(|c| (c.offset_ns, c.uncertainty_ns)), Some((o + 10, 10)));
        // A command enqueued at t0 + 5 µs started 8 ns after: the offset is at least o - 8.
        let mut floor = Floor::NONE;
        let start = (t0 + 5_008) as i64 - o;
        floor.note((t0 + 5_000) as i64 - start, t0 + 5_010);
        assert_eq!(floor.offset_ns, o - 8);
        // A command enqueued within [t0 + 10 µs, + 2 ns], stamped 2 ms later.
        let (h0, h1) = (t0 + 10_000, t0 + 10_002);
        let late = ((h0 + 1 + 2_000_000) as i64 - o) as u64;
        assert!(could_improve(current(51).as_ref(), h0, h1), "narrower: its stamp is read");
        observe_queued(51, late, h0, h1, floor);
        assert_eq!(current(51).map(|c| c.offset_ns), Some(o + 10), "refused");
        // The same stamp on a device with no floor is taken: what put commands 2 ms early.
        observe_queued(52, 1_000, t0, t0 + 20, Floor::NONE);
        observe_queued(52, late, h0, h1, Floor::NONE);
        assert_eq!(current(52).map(|c| c.offset_ns), Some(o - 2_000_000));
        // The device remembers the floor it refused with: a later stamp of the same kind is
        // refused without the harvest's.
        let (h0, h1) = (t0 + 20_000, t0 + 20_001);
        observe_queued(51, ((h0 + 3_000_000) as i64 - o) as u64, h0, h1, Floor::NONE);
        assert_eq!(current(51).map(|c| c.offset_ns), Some(o + 10));
        // A midpoint below the floor is raised to it: [o - 18, o] (narrower than ± 10) has its
        // midpoint at o - 9.
        let (h0, h1) = (t0 + 30_000, t0 + 30_018);
        observe_queued(51, (h1 as i64 - o) as u64, h0, h1, Floor::NONE);
        assert_eq!(current(51).map(|c| (c.offset_ns, c.uncertainty_ns)), Some((o - 8, 9)));
        // A command whose start the offset puts 42 ns before its enqueue raises it; a lower
        // bound does not lower it.
        raise(51, Floor { offset_ns: o + 34, at_ns: t0 + 40_000 });
        assert_eq!(current(51).map(|c| c.offset_ns), Some(o + 34));
        raise(51, Floor { offset_ns: o, at_ns: t0 + 40_000 });
        assert_eq!(current(51).map(|c| c.offset_ns), Some(o + 34));
        // A floor loosens by FLOOR_DRIFT_PPM of its age: 60 s later a bracket 3 ms below it
        // (6 ms allowed) is a clock that wandered, and is taken.
        let (h0, h1) = (t0 + 60_000_000_000, t0 + 60_000_000_002);
        observe_queued(51, ((h0 + 1) as i64 - (o + 34 - 3_000_000)) as u64, h0, h1, Floor::NONE);
        assert_eq!(current(51).map(|c| c.offset_ns), Some(o + 34 - 3_000_000));
        // An uncalibrated device is not raised (its times pass through unconverted).
        raise(53, Floor { offset_ns: 7, at_ns: 1 });
        assert_eq!(current(53), None);
    }

    #[test]
    fn bracket_is_midpoint_and_half_width() {
        assert_eq!(bracket(1_000, 1_100, 400), (650, 50));
        assert_eq!(bracket(100, 100, 400), (-300, 0));
    }

    #[test]
    fn narrower_queued_bracket_wins_and_timer_is_never_replaced() {
        observe_queued(7, 500, 1_000, 1_200, Floor::NONE); // offset 600 ± 100
        assert_eq!(to_trace(7, 10), 610);
        observe_queued(7, 500, 1_050, 1_070, Floor::NONE); // 560 ± 10: narrower
        assert_eq!(to_trace(7, 10), 570);
        observe_queued(7, 500, 900, 1_300, Floor::NONE); // wider: ignored
        assert_eq!(to_trace(7, 10), 570);
        offer(7, Method::DeviceAndHostTimer, 2_000, 2_400, 1_000); // 1200 ± 200: timer wins
        assert_eq!(to_trace(7, 10), 1_210);
        observe_queued(7, 500, 1_060, 1_061, Floor::NONE);
        assert_eq!(to_trace(7, 10), 1_210);
        let c = calibrations().into_iter().find(|c| c.device == 7).expect("device 7");
        assert_eq!((c.method, c.uncertainty_ns), (Method::DeviceAndHostTimer, 200));
    }

    #[test]
    fn uncalibrated_device_passes_through() {
        assert_eq!(to_trace(99, 12345), 12345);
    }
}
