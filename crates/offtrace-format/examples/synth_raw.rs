//! Writes a large synthetic trace of raw XPTI notifications shaped like a SYCL program that
//! submits kernels as fast as it can (the input of the tool's scale measurements against
//! earlier versions, which read only raw notifications): per submit a task-graph node and
//! edge, the command's task_begin/task_end, four `ur.call` calls (three argument settings and
//! the kernel launch), its signal and an event release; every 8th submit a USM copy and a wait,
//! every 64th an allocation and a release. About 17 records per submit, on `--threads` threads
//! interleaved.
//!
//! `cargo run --release -p offtrace-format --example synth_raw -- OUT.offtrace RECORDS [--threads N]`

use std::fs::File;
use std::io::BufWriter;

use offtrace_format::*;

type Out = TraceWriter<BufWriter<File>>;

/// The writer and the state a submit loop advances.
struct Gen {
    w: Out,
    records: u64,
    strings: u32,
    instance: u64,
    t: u64,
    tid: u32,
    fids: Vec<StrId>,
}

impl Gen {
    fn put(&mut self, r: Record) -> Result<(), WriteError> {
        self.records += 1;
        self.w.write(&r)
    }

    fn str(&mut self, text: &str) -> Result<StrId, WriteError> {
        self.strings += 1;
        let id = StrId(self.strings);
        self.put(Record::String { id, text: text.to_owned() })?;
        Ok(id)
    }

    fn note(
        &mut self,
        ts: u64,
        stream: u8,
        trace_type: u16,
        instance: u64,
        event: Option<EventInfo>,
        user_data: UserData,
    ) -> Result<(), WriteError> {
        let tid = self.tid;
        self.put(Record::from(Notification {
            ts,
            tid,
            stream,
            trace_type,
            instance,
            parent: None,
            event,
            user_data,
            stash: None,
            universal_id: 0,
        }))
    }

    /// A `ur.call` begin/end pair of `dur` ns at the current time.
    fn ur(&mut self, fid: usize, args: &[u64], outs: &[(u8, u64)], dur: u64) -> Result<(), WriteError> {
        self.instance += 1;
        let mut a = ArgBlock { len: args.len() as u8, ..ArgBlock::default() };
        a.values[..args.len()].copy_from_slice(args);
        let mut o = OutValues { len: outs.len() as u8, ..OutValues::default() };
        o.values[..outs.len()].copy_from_slice(outs);
        let name = self.fids[fid];
        let function_id = fid as u32 + 1;
        let (t, i) = (self.t, self.instance);
        self.note(
            t,
            2,
            28,
            i,
            None,
            UserData::FunctionWithArgs { function_id, name, result: None, args: a, outs: OutValues::default() },
        )?;
        self.note(
            t + dur,
            2,
            29,
            i,
            None,
            UserData::FunctionWithArgs { function_id, name, result: Some(0), args: a, outs: o },
        )?;
        self.t += dur + 15;
        Ok(())
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: synth_raw OUT.offtrace RECORDS [--threads N]");
        std::process::exit(2);
    }
    let target: u64 = args[2].replace('_', "").parse()?;
    let threads: u32 =
        args.iter().position(|a| a == "--threads").and_then(|i| args.get(i + 1)).map_or(Ok(2), |s| s.parse())?;
    let out = BufWriter::with_capacity(1 << 20, File::create(&args[1])?);
    let w = TraceWriter::new(out, &TraceHeader::monotonic())?;
    let mut g = Gen { w, records: 0, strings: 0, instance: 1, t: 1_000_000_000, tid: 1000, fids: Vec::new() };
    g.put(Record::Info { key: "command".into(), value: "synthetic SYCL submit loop".into() })?;
    g.put(Record::Info { key: "pid".into(), value: "4242".into() })?;
    for (id, name) in [(1u8, "sycl"), (2, "ur.call"), (3, "sycl.experimental.mem_alloc")] {
        let name = g.str(name)?;
        let version = g.str("1.0")?;
        g.put(Record::Stream { id, name, major: 1, minor: 0, version })?;
    }
    for f in [
        "urKernelSetArgPointer",
        "urKernelSetArgValue",
        "urEnqueueKernelLaunch",
        "urEventRelease",
        "urEnqueueUSMMemcpy",
        "urEventWait",
        "urUSMDeviceAlloc",
        "urUSMFree",
    ] {
        let id = g.str(f)?;
        g.fids.push(id);
    }
    let kernels = [
        "_ZTSZZ4mainENKUlRN4sycl3_V17handlerEE_clES2_EUlNS0_2idILi1EEEE_",
        "scale_add",
        "square",
        "_ZTS12ReduceKernelIfLi256EE",
    ];
    let kernel_key = g.str("kernel_name")?;
    let file = g.str("synthetic.cpp")?;
    let mut kernel_events = Vec::new();
    for (i, k) in kernels.iter().enumerate() {
        let name = g.str(k)?;
        let id = i as u32 + 1;
        g.put(Record::Payload { id: PayloadId(id), name, file, line: 10 + id, column: 5 })?;
        g.put(Record::Object { id: ObjectId(id), value_type: ValueType::String, bytes: k.as_bytes().to_vec() })?;
        g.put(Record::MetadataSet { id: MetadataSetId(id), items: vec![(kernel_key, ObjectId(id))] })?;
        kernel_events.push((PayloadId(id), MetadataSetId(id)));
    }
    let memcpy = g.str("memcpy")?;
    g.put(Record::Payload { id: PayloadId(100), name: memcpy, file, line: 99, column: 1 })?;
    let edge = g.str("edge")?;
    g.put(Record::Payload { id: PayloadId(101), name: edge, file, line: 0, column: 0 })?;
    for t in 0..threads {
        let name = g.str(&format!("submitter-{t}"))?;
        g.put(Record::Thread { tid: 1000 + t, name })?;
    }
    let mut uid = 1u64 << 40;
    let mut prev_node = 0u64;
    let mut iteration = 0u64;
    while g.records < target {
        g.tid = 1000 + (iteration % u64::from(threads)) as u32;
        let k = (iteration % kernels.len() as u64) as usize;
        let (payload, metadata) = kernel_events[k];
        uid += 1;
        let ev =
            EventInfo { uid, instance_id: 1, event_type: 2, activity_type: 1, payload, metadata, ..Default::default() };
        g.t += 300;
        let (ts, cmd) = (g.t, g.instance);
        g.note(ts, 1, 4, cmd, Some(ev), UserData::None)?;
        let e = EventInfo {
            uid: uid + (1 << 50),
            source_id: prev_node,
            target_id: uid,
            payload: PayloadId(101),
            ..Default::default()
        };
        prev_node = uid;
        g.note(ts + 20, 1, 6, cmd, Some(e), UserData::None)?;
        g.note(ts + 40, 1, 10, cmd, Some(ev), UserData::None)?;
        g.t = ts + 60;
        let kernel_handle = 0x5555_0000_1000 + k as u64 * 0x100;
        let queue = 0x5555_0000_8000 + u64::from(g.tid % 2) * 0x40;
        let event = 0x5555_1000_0000 + iteration * 0x40;
        g.ur(0, &[kernel_handle, 0, 0, 0x7f00_0000_0000 + iteration % 64 * 0x1000], &[], 40)?;
        g.ur(0, &[kernel_handle, 1, 0, 0x7f00_0010_0000], &[], 35)?;
        g.ur(1, &[kernel_handle, 2, 4, 0, 0x7ffc_0000_1000], &[], 30)?;
        g.ur(2, &[queue, kernel_handle, 1, 0, 0, 1 << 20, 0, 256, 0, 0, 0, 0], &[(11, event)], 900)?;
        let t = g.t;
        g.note(t, 1, 16, cmd, Some(ev), UserData::Signal { ur_event: event })?;
        g.note(t + 10, 1, 11, cmd, Some(ev), UserData::None)?;
        g.t += 30;
        g.ur(3, &[event], &[], 25)?;
        if iteration % 8 == 7 {
            g.instance += 1;
            let copy = g.instance;
            let cev = EventInfo { uid: uid + (1 << 51), payload: PayloadId(100), event_type: 2, ..Default::default() };
            let t = g.t;
            g.note(t, 1, 10, copy, Some(cev), UserData::None)?;
            g.t += 10;
            g.ur(4, &[queue, 0, 0x7f00_0020_0000, 0x7f00_0030_0000, 65536, 0, 0, 0], &[(7, event + 8)], 1500)?;
            let t = g.t;
            g.note(t, 1, 11, copy, Some(cev), UserData::None)?;
            g.note(t + 5, 1, 22, copy, Some(cev), UserData::None)?;
            g.t += 10;
            g.ur(5, &[1, event + 8], &[], 20_000)?;
            let t = g.t;
            g.note(t, 1, 23, copy, Some(cev), UserData::None)?;
        }
        if iteration % 64 == 63 {
            g.instance += 1;
            let alloc = g.instance;
            let ptr = 0x7f10_0000_0000 + iteration * 0x10_0000;
            let md = |p: u64, size: u64| UserData::MemAlloc {
                mem_object: 0,
                alloc_pointer: p,
                alloc_size: size,
                guard_zone: 0,
            };
            let t = g.t;
            g.note(t, 3, 32, alloc, None, md(0, 1 << 20))?;
            g.ur(6, &[0x5555_0000_0100, 0x5555_0000_0200, 0, 0, 1 << 20], &[(5, ptr)], 5000)?;
            let t = g.t;
            g.note(t, 3, 33, alloc, None, md(ptr, 1 << 20))?;
            g.instance += 1;
            let release = g.instance;
            g.note(t + 10, 3, 34, release, None, md(ptr, 0))?;
            g.ur(7, &[0x5555_0000_0100, ptr], &[], 3000)?;
            let t = g.t;
            g.note(t, 3, 35, release, None, md(ptr, 0))?;
        }
        g.instance += 1;
        iteration += 1;
        if iteration.is_multiple_of(4096) {
            g.w.flush_chunk()?;
        }
    }
    let records = g.records + 1;
    g.put(Record::End { records, drops: 0 })?;
    g.w.finish()?;
    eprintln!("{records} records, {iteration} submits");
    Ok(())
}
