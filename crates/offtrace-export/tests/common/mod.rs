//! Independent readers of the export formats for the tests: a minimal protobuf decoder
//! written here (not the encoder's code) and a checker that rebuilds the slices of every
//! track as a trace viewer does (events sorted by time, file order among equal times, one stack
//! per track), so overlapping or ambiguous slices show as slices that differ from the input.

#![allow(dead_code, clippy::unwrap_used)]

use std::collections::HashMap;

// ---- an independent minimal protobuf decoder -------------------------------------------

#[derive(Debug, Clone)]
enum Val {
    Varint(u64),
    Fixed64(u64),
    Bytes(Vec<u8>),
    Fixed32,
}

fn read_varint(b: &[u8], pos: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let byte = b[*pos];
        *pos += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return v;
        }
        shift += 7;
        assert!(shift < 70, "varint too long");
    }
}

/// Decodes one message into (field number, value) pairs, in order.
fn decode(b: &[u8]) -> Vec<(u32, Val)> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < b.len() {
        let key = read_varint(b, &mut pos);
        let field = (key >> 3) as u32;
        let v = match key & 7 {
            0 => Val::Varint(read_varint(b, &mut pos)),
            1 => {
                let v = u64::from_le_bytes(b[pos..pos + 8].try_into().unwrap());
                pos += 8;
                Val::Fixed64(v)
            }
            2 => {
                let len = read_varint(b, &mut pos) as usize;
                let v = b[pos..pos + len].to_vec();
                pos += len;
                Val::Bytes(v)
            }
            5 => {
                let v = u32::from_le_bytes(b[pos..pos + 4].try_into().unwrap());
                pos += 4;
                let _ = v;
                Val::Fixed32
            }
            w => panic!("unexpected wire type {w} at {pos}"),
        };
        out.push((field, v));
    }
    assert_eq!(pos, b.len());
    out
}

fn get(m: &[(u32, Val)], field: u32) -> Option<&Val> {
    m.iter().find(|(f, _)| *f == field).map(|(_, v)| v)
}
fn get_u(m: &[(u32, Val)], field: u32) -> Option<u64> {
    match get(m, field)? {
        Val::Varint(v) => Some(*v),
        _ => None,
    }
}
fn get_msg(m: &[(u32, Val)], field: u32) -> Option<Vec<(u32, Val)>> {
    match get(m, field)? {
        Val::Bytes(b) => Some(decode(b)),
        _ => None,
    }
}
fn get_str(m: &[(u32, Val)], field: u32) -> Option<String> {
    match get(m, field)? {
        Val::Bytes(b) => Some(String::from_utf8(b.clone()).unwrap()),
        _ => None,
    }
}
fn all_fixed(m: &[(u32, Val)], field: u32) -> Vec<u64> {
    m.iter()
        .filter(|(f, _)| *f == field)
        .filter_map(|(_, v)| if let Val::Fixed64(x) = v { Some(*x) } else { None })
        .collect()
}

fn get_i(m: &[(u32, Val)], field: u32) -> Option<i64> {
    get_u(m, field).map(|v| v as i64)
}

/// Perfetto field numbers, written out here independently of the exporter's constants.
pub mod pf {
    pub const PACKET: u32 = 1;
    pub const TIMESTAMP: u32 = 8;
    pub const TIMESTAMP_CLOCK_ID: u32 = 58;
    pub const CLOCK_SNAPSHOT: u32 = 6;
    pub const TRACK_EVENT: u32 = 11;
    pub const TRACK_DESCRIPTOR: u32 = 60;
    pub const MONOTONIC: u64 = 3;
}

#[derive(Debug, Clone, Default)]
pub struct Track {
    pub name: String,
    pub parent: Option<u64>,
    pub thread: Option<(i64, i64)>,
    pub counter: bool,
}

/// A slice as a viewer rebuilds it.
#[derive(Debug, Clone, PartialEq)]
pub struct ViewSlice {
    pub track: u64,
    pub start: u64,
    pub end: u64,
    pub name: String,
    pub category: String,
    pub depth: usize,
    pub flows: Vec<u64>,
    pub terminating: Vec<u64>,
    pub annotations: Vec<String>,
}

#[derive(Debug, Default)]
pub struct Decoded {
    pub clock_snapshot: Vec<(u64, u64)>,
    pub primary_clock: Option<u64>,
    pub tracks: HashMap<u64, Track>,
    pub slices: Vec<ViewSlice>,
    pub instants: Vec<ViewSlice>,
    pub counters: Vec<(u64, u64, f64)>,
    /// Timed packets without `timestamp_clock_id` = MONOTONIC.
    pub packets_without_clock: u64,
    /// Problems a viewer would hit: an end without a begin, a begin never ended, an end and a
    /// begin at the same time on one track (order left to the sort).
    pub problems: Vec<String>,
}

/// Decodes a `.pftrace` and rebuilds its slices.
pub fn decode_pftrace(bytes: &[u8]) -> Decoded {
    let mut d = Decoded::default();
    // (ts, file order, track, begin?, slice data)
    let mut events: Vec<(u64, usize, u64, u64, Option<ViewSlice>)> = Vec::new();
    for (i, (field, v)) in decode(bytes).into_iter().enumerate() {
        assert_eq!(field, pf::PACKET);
        let Val::Bytes(p) = v else { panic!("packet is not a message") };
        let p = decode(&p);
        let ts = get_u(&p, pf::TIMESTAMP);
        if ts.is_some() && get_u(&p, pf::TIMESTAMP_CLOCK_ID) != Some(pf::MONOTONIC) {
            d.packets_without_clock += 1;
        }
        if let Some(s) = get_msg(&p, pf::CLOCK_SNAPSHOT) {
            d.primary_clock = get_u(&s, 2);
            for (f, c) in &s {
                if *f == 1
                    && let Val::Bytes(c) = c
                {
                    let c = decode(c);
                    d.clock_snapshot.push((get_u(&c, 1).unwrap(), get_u(&c, 2).unwrap()));
                }
            }
        }
        if let Some(t) = get_msg(&p, pf::TRACK_DESCRIPTOR) {
            let uuid = get_u(&t, 1).unwrap();
            let mut track =
                Track { name: get_str(&t, 2).unwrap_or_default(), parent: get_u(&t, 5), ..Track::default() };
            if let Some(th) = get_msg(&t, 4) {
                track.thread = Some((get_i(&th, 1).unwrap_or(0), get_i(&th, 2).unwrap()));
                track.name = get_str(&th, 5).unwrap_or_default();
            }
            if let Some(pr) = get_msg(&t, 3) {
                track.name = get_str(&pr, 6).unwrap_or_default();
            }
            track.counter = get(&t, 8).is_some();
            d.tracks.insert(uuid, track);
        }
        if let Some(e) = get_msg(&p, pf::TRACK_EVENT) {
            let ts = ts.expect("a track event without timestamp");
            let track = get_u(&e, 11).expect("a track event without track");
            let ty = get_u(&e, 9).unwrap();
            let slice = ViewSlice {
                track,
                start: ts,
                end: ts,
                name: get_str(&e, 23).unwrap_or_default(),
                category: get_str(&e, 22).unwrap_or_default(),
                depth: 0,
                flows: all_fixed(&e, 47),
                terminating: all_fixed(&e, 48),
                annotations: e
                    .iter()
                    .filter(|(f, _)| *f == 4)
                    .filter_map(|(_, v)| if let Val::Bytes(b) = v { get_str(&decode(b), 10) } else { None })
                    .collect(),
            };
            match ty {
                1 => events.push((ts, i, track, 1, Some(slice))),
                2 => events.push((ts, i, track, 0, None)),
                3 => d.instants.push(slice),
                4 => {
                    let v = match get(&e, 44) {
                        Some(Val::Fixed64(bits)) => f64::from_bits(*bits),
                        _ => get_i(&e, 30).unwrap_or(0) as f64,
                    };
                    d.counters.push((track, ts, v));
                }
                t => panic!("unknown event type {t}"),
            }
        }
    }
    // A viewer's sort: by time, file order among equal times.
    events.sort_by_key(|e| (e.0, e.1));
    let mut stacks: HashMap<u64, Vec<ViewSlice>> = HashMap::new();
    let mut last_end: HashMap<u64, u64> = HashMap::new();
    for (ts, _, track, begin, slice) in events {
        let stack = stacks.entry(track).or_default();
        if begin == 1 {
            if last_end.get(&track) == Some(&ts) {
                d.problems.push(format!("track {track}: a slice begins at {ts} when another ends"));
            }
            let mut s = slice.unwrap();
            s.depth = stack.len();
            stack.push(s);
        } else {
            match stack.pop() {
                Some(mut s) => {
                    if s.start == ts && !stack.is_empty() && stack.last().unwrap().start == ts {
                        d.problems.push(format!("track {track}: two slices begin at {ts}"));
                    }
                    s.end = ts;
                    last_end.insert(track, ts);
                    d.slices.push(s);
                }
                None => d.problems.push(format!("track {track}: an end at {ts} without a begin")),
            }
        }
    }
    for (track, s) in stacks {
        if !s.is_empty() {
            d.problems.push(format!("track {track}: {} slices never end", s.len()));
        }
    }
    d
}
