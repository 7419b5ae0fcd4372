//! Activation, time-based streamers and event-based queries over a [`Catalog`]: the state
//! machine of the seed's `zetDeviceActivateMetricGroups`, `zetMetricTracer*` (streamer) and
//! `zetMetricQuery*`, with the misuse codes of [`crate::error`].
//!
//! Handles are ids into tables (never pointers), so a closed or destroyed handle is detected and
//! answered with `INVALID_NULL_HANDLE` instead of being dereferenced.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use crate::catalog::{Catalog, Collector};
use crate::error::MetricsError;
use crate::model::{GroupInfo, RawReport, SamplingTypes, TypedValue, calculate, calculate_into};

/// A group: its index in the catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GroupHandle(pub usize);
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StreamerHandle(pub u64);
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QueryPoolHandle(pub u64);
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QueryHandle(pub u64);

/// CLOCK_MONOTONIC in ns: the trace's clock.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    #[allow(unsafe_code)]
    // SAFETY: clock_gettime writes a timespec into a live local.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts)
    };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CPU time of the calling thread in ns.
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    #[allow(unsafe_code)]
    // SAFETY: clock_gettime writes a timespec into a live local.
    unsafe {
        libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts)
    };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Called on the streamer's thread for each report, right after collection (so the emit time is
/// the sample time): the group, the raw report and its calculated values.
pub type ReportCallback = Box<dyn FnMut(&GroupInfo, &RawReport, &[TypedValue]) + Send>;

/// `zet_metric_tracer_desc_t` plus offtrace's options.
#[derive(Debug, Clone, Copy)]
pub struct StreamerDesc {
    pub sampling_period: Duration,
    /// Wake [`Metrics::streamer_wait`] every N reports.
    pub notify_every_n_reports: u32,
    /// Keep raw reports for [`Metrics::streamer_read_data`] (at most `MAX_BUFFER_BYTES`; the
    /// oldest are dropped and counted beyond).
    pub keep_raw: bool,
    /// Take one last report at close (totals then cover the streamer's whole life).
    pub final_report: bool,
}

impl Default for StreamerDesc {
    fn default() -> Self {
        Self {
            sampling_period: Duration::from_millis(10),
            notify_every_n_reports: 1,
            keep_raw: true,
            final_report: false,
        }
    }
}

pub const MAX_BUFFER_BYTES: usize = 16 << 20;

/// Cost and count of a streamer's sampling.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamerStats {
    pub reports: u64,
    /// CPU time of the sampling thread (waking up, collecting, calculating, the callback).
    pub sampling_cpu_ns: u64,
    /// Reports dropped from a full buffer.
    pub dropped: u64,
}

struct Buffer {
    raw: std::collections::VecDeque<u8>,
    since_notify: u32,
    notified: bool,
}

struct StreamerShared {
    group: usize,
    report_len: usize,
    buffer: Mutex<Buffer>,
    data: Condvar,
    stop: Mutex<bool>,
    stop_cv: Condvar,
    reports: AtomicU64,
    cpu_ns: AtomicU64,
    dropped: AtomicU64,
    failed: AtomicBool,
}

struct Streamer {
    shared: Arc<StreamerShared>,
    device: u32,
    thread: Option<std::thread::JoinHandle<()>>,
}

struct Pool {
    group: usize,
    count: u32,
    collector: Mutex<Collector>,
}

struct Query {
    pool: u64,
    begin: Option<(u64, Vec<u64>)>,
    end: Option<(u64, Vec<u64>)>,
    /// A GPU range query's kernels (name, values), from its end.
    ranges: Option<Vec<crate::cupti::RangeValues>>,
}

#[derive(Default)]
struct State {
    active: HashMap<u32, Vec<usize>>,
    streamers: HashMap<u64, Streamer>,
    pools: HashMap<u64, Pool>,
    queries: HashMap<u64, Query>,
    next: u64,
}

/// The metrics model over one catalog.
pub struct Metrics {
    catalog: Catalog,
    state: Mutex<State>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").field("groups", &self.catalog.groups.len()).finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Metrics {
    pub fn new(catalog: Catalog) -> Self {
        Self { catalog, state: Mutex::new(State { next: 1, ..State::default() }) }
    }

    /// The process-wide instance over [`Catalog::discover`] (probed at first use).
    pub fn global() -> &'static Metrics {
        static G: OnceLock<Metrics> = OnceLock::new();
        G.get_or_init(|| Metrics::new(Catalog::discover()))
    }

    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    fn group(&self, g: GroupHandle) -> Result<&crate::catalog::Group, MetricsError> {
        self.catalog.groups.get(g.0).ok_or(MetricsError::InvalidNullHandle)
    }

    pub fn group_info(&self, g: GroupHandle) -> Result<&GroupInfo, MetricsError> {
        Ok(&self.group(g)?.info)
    }

    /// `zetDeviceActivateMetricGroups`: makes exactly `groups` active on `device` (empty:
    /// deactivates all). Two groups of one domain: `NOT_AVAILABLE`; a group of another device:
    /// `INVALID_ARGUMENT`; deactivating a group with an open streamer or query pool:
    /// `HANDLE_OBJECT_IN_USE`. On error nothing changes.
    pub fn activate(&self, device: u32, groups: &[GroupHandle]) -> Result<(), MetricsError> {
        if !self.catalog.devices.iter().any(|d| d.id == device) {
            return Err(MetricsError::InvalidNullHandle);
        }
        let mut domains = Vec::new();
        for g in groups {
            let info = self.group_info(*g)?;
            if info.device != device {
                return Err(MetricsError::InvalidArgument);
            }
            if domains.contains(&info.domain) {
                return Err(MetricsError::NotAvailable);
            }
            domains.push(info.domain);
        }
        let mut st = lock(&self.state);
        let in_use = |gi: usize, st: &State| {
            st.streamers.values().any(|s| s.shared.group == gi) || st.pools.values().any(|p| p.group == gi)
        };
        if let Some(old) = st.active.get(&device)
            && old.iter().any(|gi| !groups.iter().any(|g| g.0 == *gi) && in_use(*gi, &st))
        {
            return Err(MetricsError::HandleObjectInUse);
        }
        st.active.insert(device, groups.iter().map(|g| g.0).collect());
        Ok(())
    }

    /// Whether `group` is active on its device.
    pub fn is_active(&self, g: GroupHandle) -> bool {
        let Ok(info) = self.group_info(g) else { return false };
        lock(&self.state).active.get(&info.device).is_some_and(|v| v.contains(&g.0))
    }

    fn check_usable(&self, device: u32, g: GroupHandle, need: SamplingTypes) -> Result<(), MetricsError> {
        let info = self.group_info(g)?;
        if info.device != device || !info.sampling.contains(need) {
            return Err(MetricsError::InvalidArgument);
        }
        if !self.is_active(g) {
            return Err(MetricsError::InvalidArgument);
        }
        Ok(())
    }

    /// `zetMetricTracerOpen` (streamer): samples the active, time-based `group` every
    /// `desc.sampling_period` on a thread of its own. Not time-based or not active:
    /// `INVALID_ARGUMENT`; a second streamer on the group: `NOT_AVAILABLE`.
    pub fn streamer_open(
        &self,
        device: u32,
        g: GroupHandle,
        desc: StreamerDesc,
        callback: Option<ReportCallback>,
    ) -> Result<StreamerHandle, MetricsError> {
        self.check_usable(device, g, SamplingTypes::TIME_BASED)?;
        if desc.sampling_period.is_zero() {
            return Err(MetricsError::InvalidArgument);
        }
        let group = self.group(g)?;
        let mut st = lock(&self.state);
        if st.streamers.values().any(|s| s.shared.group == g.0) {
            return Err(MetricsError::NotAvailable);
        }
        let mut collector = group.open_for(Some(desc.sampling_period))?;
        let slots = group.slots;
        let mut base = vec![0u64; slots];
        collector.read(&mut base)?;
        let base_ts = monotonic_ns();
        let shared = Arc::new(StreamerShared {
            group: g.0,
            report_len: RawReport::encoded_len(slots),
            buffer: Mutex::new(Buffer { raw: Default::default(), since_notify: 0, notified: false }),
            data: Condvar::new(),
            stop: Mutex::new(false),
            stop_cv: Condvar::new(),
            reports: AtomicU64::new(0),
            cpu_ns: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            failed: AtomicBool::new(false),
        });
        let info = group.info.clone();
        let sh = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("offtrace-sample".into())
            .spawn(move || sample_loop(&sh, collector, info, desc, base, base_ts, callback))
            .map_err(|_| MetricsError::Unknown)?;
        let id = st.next;
        st.next += 1;
        st.streamers.insert(id, Streamer { shared, device, thread: Some(thread) });
        Ok(StreamerHandle(id))
    }

    /// `zetMetricTracerReadData`: removes and returns up to `max_reports` whole raw reports
    /// (`u32::MAX`: all). A closed streamer: `INVALID_NULL_HANDLE`.
    pub fn streamer_read_data(&self, s: StreamerHandle, max_reports: u32) -> Result<Vec<u8>, MetricsError> {
        let shared = {
            let st = lock(&self.state);
            Arc::clone(&st.streamers.get(&s.0).ok_or(MetricsError::InvalidNullHandle)?.shared)
        };
        let mut b = lock(&shared.buffer);
        let avail = b.raw.len() / shared.report_len;
        let n = avail.min(max_reports as usize);
        let out: Vec<u8> = b.raw.drain(..n * shared.report_len).collect();
        b.notified = false;
        Ok(out)
    }

    /// Bytes [`Self::streamer_read_data`] would return for `max_reports` now (the size query of
    /// `zetMetricTracerReadData`).
    pub fn streamer_available_bytes(&self, s: StreamerHandle, max_reports: u32) -> Result<usize, MetricsError> {
        let shared = {
            let st = lock(&self.state);
            Arc::clone(&st.streamers.get(&s.0).ok_or(MetricsError::InvalidNullHandle)?.shared)
        };
        let b = lock(&shared.buffer);
        Ok((b.raw.len() / shared.report_len).min(max_reports as usize) * shared.report_len)
    }

    /// Bytes of one raw report of a streamer's group.
    pub fn streamer_report_bytes(&self, s: StreamerHandle) -> Result<usize, MetricsError> {
        let st = lock(&self.state);
        Ok(st.streamers.get(&s.0).ok_or(MetricsError::InvalidNullHandle)?.shared.report_len)
    }

    /// Bytes of one raw report of group `g`.
    pub fn report_bytes(&self, g: GroupHandle) -> Result<usize, MetricsError> {
        Ok(RawReport::encoded_len(self.group(g)?.slots))
    }

    /// Waits until the streamer's notification (every N reports) or `timeout`: `NOT_READY` on
    /// timeout (as `zeEventHostSynchronize` on the notification event).
    pub fn streamer_wait(&self, s: StreamerHandle, timeout: Duration) -> Result<(), MetricsError> {
        let shared = {
            let st = lock(&self.state);
            Arc::clone(&st.streamers.get(&s.0).ok_or(MetricsError::InvalidNullHandle)?.shared)
        };
        let b = lock(&shared.buffer);
        let (b, _) = shared.data.wait_timeout_while(b, timeout, |b| !b.notified).unwrap_or_else(|p| p.into_inner());
        if b.notified { Ok(()) } else { Err(MetricsError::NotReady) }
    }

    pub fn streamer_stats(&self, s: StreamerHandle) -> Result<StreamerStats, MetricsError> {
        let st = lock(&self.state);
        let sh = &st.streamers.get(&s.0).ok_or(MetricsError::InvalidNullHandle)?.shared;
        Ok(stats_of(sh))
    }

    /// `zetMetricTracerClose`: stops the thread (after its final report when asked) and returns
    /// its statistics. A closed streamer: `INVALID_NULL_HANDLE`.
    pub fn streamer_close(&self, s: StreamerHandle) -> Result<StreamerStats, MetricsError> {
        let mut streamer = lock(&self.state).streamers.remove(&s.0).ok_or(MetricsError::InvalidNullHandle)?;
        *lock(&streamer.shared.stop) = true;
        streamer.shared.stop_cv.notify_all();
        if let Some(t) = streamer.thread.take() {
            let _ = t.join();
        }
        let _ = streamer.device;
        Ok(stats_of(&streamer.shared))
    }

    /// `zetMetricQueryPoolCreate`: `count` queries over the active, event-based `group`
    /// (thread-scope groups count the calling thread). Not event-based or not active:
    /// `INVALID_ARGUMENT`.
    pub fn query_pool_create(&self, device: u32, g: GroupHandle, count: u32) -> Result<QueryPoolHandle, MetricsError> {
        self.check_usable(device, g, SamplingTypes::EVENT_BASED)?;
        if count == 0 {
            return Err(MetricsError::InvalidSize);
        }
        let collector = self.group(g)?.open()?;
        let mut st = lock(&self.state);
        let id = st.next;
        st.next += 1;
        st.pools.insert(id, Pool { group: g.0, count, collector: Mutex::new(collector) });
        Ok(QueryPoolHandle(id))
    }

    /// `zetMetricQueryPoolDestroy`: queries still alive: `HANDLE_OBJECT_IN_USE`.
    pub fn query_pool_destroy(&self, p: QueryPoolHandle) -> Result<(), MetricsError> {
        let mut st = lock(&self.state);
        if !st.pools.contains_key(&p.0) {
            return Err(MetricsError::InvalidNullHandle);
        }
        if st.queries.values().any(|q| q.pool == p.0) {
            return Err(MetricsError::HandleObjectInUse);
        }
        st.pools.remove(&p.0);
        Ok(())
    }

    /// `zetMetricQueryCreate`: query `index` of the pool.
    pub fn query_create(&self, p: QueryPoolHandle, index: u32) -> Result<QueryHandle, MetricsError> {
        let mut st = lock(&self.state);
        let pool = st.pools.get(&p.0).ok_or(MetricsError::InvalidNullHandle)?;
        if index >= pool.count {
            return Err(MetricsError::InvalidArgument);
        }
        let id = st.next;
        st.next += 1;
        st.queries.insert(id, Query { pool: p.0, begin: None, end: None, ranges: None });
        Ok(QueryHandle(id))
    }

    pub fn query_destroy(&self, q: QueryHandle) -> Result<(), MetricsError> {
        lock(&self.state).queries.remove(&q.0).map(|_| ()).ok_or(MetricsError::InvalidNullHandle)
    }

    /// `zetMetricQueryReset`.
    pub fn query_reset(&self, q: QueryHandle) -> Result<(), MetricsError> {
        let mut st = lock(&self.state);
        let query = st.queries.get_mut(&q.0).ok_or(MetricsError::InvalidNullHandle)?;
        query.begin = None;
        query.end = None;
        query.ranges = None;
        Ok(())
    }

    fn snapshot(&self, q: QueryHandle, end: bool) -> Result<(), MetricsError> {
        let mut st = lock(&self.state);
        let pool_id = st.queries.get(&q.0).ok_or(MetricsError::InvalidNullHandle)?.pool;
        let (slots, pool) = {
            let pool = st.pools.get(&pool_id).ok_or(MetricsError::InvalidNullHandle)?;
            (self.catalog.groups[pool.group].slots, pool)
        };
        let mut v = vec![0u64; slots];
        let mut ranges = None;
        {
            let mut c = lock(&pool.collector);
            if c.is_range() {
                // GPU: begin starts the range profiler, end collects one range per kernel.
                if end {
                    if st.queries.get(&q.0).is_none_or(|q| q.begin.is_none()) {
                        return Err(MetricsError::InvalidArgument);
                    }
                    ranges = Some(c.range_stop()?);
                } else {
                    c.range_start()?;
                }
            } else {
                c.read(&mut v)?;
            }
        }
        let ts = monotonic_ns();
        let query = st.queries.get_mut(&q.0).ok_or(MetricsError::InvalidNullHandle)?;
        query.ranges = ranges;
        if end {
            if query.begin.is_none() {
                return Err(MetricsError::InvalidArgument);
            }
            query.end = Some((ts, v));
        } else {
            query.begin = Some((ts, v));
            query.end = None;
        }
        Ok(())
    }

    /// `zetCommandListAppendMetricQueryBegin`, for host commands: the group's values now.
    pub fn query_begin(&self, q: QueryHandle) -> Result<(), MetricsError> {
        self.snapshot(q, false)
    }

    /// `zetCommandListAppendMetricQueryEnd`. Without a begin: `INVALID_ARGUMENT`.
    pub fn query_end(&self, q: QueryHandle) -> Result<(), MetricsError> {
        self.snapshot(q, true)
    }

    /// `zetMetricQueryGetData`: one raw report (begin = baseline and interval start, end = now).
    /// Before its end: `NOT_READY`.
    pub fn query_get_data(&self, q: QueryHandle) -> Result<Vec<u8>, MetricsError> {
        let st = lock(&self.state);
        let query = st.queries.get(&q.0).ok_or(MetricsError::InvalidNullHandle)?;
        let (Some((t0, b)), Some((t1, e))) = (&query.begin, &query.end) else {
            return Err(MetricsError::NotReady);
        };
        if let Some(ranges) = &query.ranges {
            // One report per kernel; the values are CUPTI's, as f64 bits (`Calc::GaugeF64`).
            let mut out = Vec::new();
            for r in ranges {
                let zeros = vec![0u64; r.values.len()];
                let now = r.values.iter().map(|v| v.to_bits()).collect();
                RawReport { ts_ns: *t1, prev_ts_ns: *t0, now, prev: zeros.clone(), base: zeros }.encode_into(&mut out);
            }
            return Ok(out);
        }
        let r = RawReport { ts_ns: *t1, prev_ts_ns: *t0, now: e.clone(), prev: b.clone(), base: b.clone() };
        let mut out = Vec::new();
        r.encode_into(&mut out);
        Ok(out)
    }

    /// The kernels (range names) of a GPU range query, in the order of its reports; empty for a
    /// host query. Before its end: `NOT_READY`.
    pub fn query_range_names(&self, q: QueryHandle) -> Result<Vec<String>, MetricsError> {
        let st = lock(&self.state);
        let query = st.queries.get(&q.0).ok_or(MetricsError::InvalidNullHandle)?;
        if query.end.is_none() {
            return Err(MetricsError::NotReady);
        }
        Ok(query.ranges.as_ref().map(|r| r.iter().map(|r| r.name.clone()).collect()).unwrap_or_default())
    }

    /// `zetMetricGroupCalculateMetricValues`: one value per metric per report in `raw`.
    /// A partial report: `INVALID_SIZE`.
    pub fn calculate(&self, g: GroupHandle, raw: &[u8]) -> Result<Vec<Vec<TypedValue>>, MetricsError> {
        let group = self.group(g)?;
        let reports = RawReport::decode_all(raw, group.slots).ok_or(MetricsError::InvalidSize)?;
        Ok(reports.iter().map(|r| calculate(&group.info.metrics, r)).collect())
    }
}

fn stats_of(sh: &StreamerShared) -> StreamerStats {
    StreamerStats {
        reports: sh.reports.load(Ordering::Relaxed),
        sampling_cpu_ns: sh.cpu_ns.load(Ordering::Relaxed),
        dropped: sh.dropped.load(Ordering::Relaxed),
    }
}

fn sample_loop(
    sh: &StreamerShared,
    mut collector: Collector,
    info: GroupInfo,
    desc: StreamerDesc,
    base: Vec<u64>,
    base_ts: u64,
    mut callback: Option<ReportCallback>,
) {
    let start = Instant::now();
    // The thread's whole CPU time counts (waking up included), not only collect + emit.
    let thread_cpu0 = thread_cpu_ns();
    let mut prev = base.clone();
    let mut prev_ts = base_ts;
    let mut now = vec![0u64; base.len()];
    let mut prev2 = base.clone();
    let mut prev2_ts = base_ts;
    let mut has_prev2 = false;
    let mut base_v = base;
    let mut values = Vec::with_capacity(info.metrics.len());
    let mut encoded = Vec::with_capacity(sh.report_len);
    let mut k: u32 = 1;
    loop {
        // Wait for the next period boundary (no drift: boundaries are start + k * period) or stop.
        let deadline = start + desc.sampling_period * k;
        let mut stopped = lock(&sh.stop);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if *stopped || left.is_zero() {
                break;
            }
            stopped = sh.stop_cv.wait_timeout(stopped, left).unwrap_or_else(|p| p.into_inner()).0;
        }
        let stop = *stopped;
        drop(stopped);
        if stop && !desc.final_report {
            return;
        }
        // Catch up without a burst when the thread was late by more than a period.
        let elapsed = start.elapsed();
        k = (elapsed.as_nanos() / desc.sampling_period.as_nanos().max(1)) as u32 + 1;
        if collector.read(&mut now).is_err() {
            sh.failed.store(true, Ordering::Relaxed);
            return;
        }
        let ts = monotonic_ns();
        // The final report at close may come right after the last periodic one: its rates would
        // be over a sliver of time. It then spans both intervals (from the previous report's
        // start), so its rates are over at least one period.
        if stop && ts.saturating_sub(prev_ts) < desc.sampling_period.as_nanos() as u64 / 2 && has_prev2 {
            prev.copy_from_slice(&prev2);
            prev_ts = prev2_ts;
        }
        // The report owns its vectors for the callback; they are handed back after it (no
        // allocation per sample).
        let mut report = RawReport {
            ts_ns: ts,
            prev_ts_ns: prev_ts,
            now: std::mem::take(&mut now),
            prev: std::mem::take(&mut prev),
            base: std::mem::take(&mut base_v),
        };
        if let Some(cb) = callback.as_mut() {
            calculate_into(&info.metrics, &report, &mut values);
            cb(&info, &report, &values);
        }
        if desc.keep_raw {
            encoded.clear();
            report.encode_into(&mut encoded);
            let mut b = lock(&sh.buffer);
            while b.raw.len() + encoded.len() > MAX_BUFFER_BYTES && !b.raw.is_empty() {
                b.raw.drain(..sh.report_len);
                sh.dropped.fetch_add(1, Ordering::Relaxed);
            }
            b.raw.extend(&encoded);
            b.since_notify += 1;
            if b.since_notify >= desc.notify_every_n_reports.max(1) {
                b.since_notify = 0;
                b.notified = true;
                sh.data.notify_all();
            }
        }
        prev2.copy_from_slice(&report.prev);
        prev2_ts = report.prev_ts_ns;
        has_prev2 = true;
        now = std::mem::take(&mut report.prev);
        prev = std::mem::take(&mut report.now);
        base_v = std::mem::take(&mut report.base);
        prev_ts = ts;
        // Relaxed: statistics, read after join or as a snapshot.
        sh.reports.fetch_add(1, Ordering::Relaxed);
        sh.cpu_ns.store(thread_cpu_ns().saturating_sub(thread_cpu0), Ordering::Relaxed);
        if stop {
            return;
        }
    }
}
