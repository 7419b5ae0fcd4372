//! Checks a `.pftrace` file with the independent decoder of `common/` and prints what a viewer
//! would show: `OFFTRACE_CHECK_PFTRACE=run.pftrace cargo test -p offtrace-export --test
//! check_pftrace -- --nocapture`. Without the variable there is nothing to check.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;

#[test]
fn check_a_pftrace_file() {
    let Some(path) = std::env::var_os("OFFTRACE_CHECK_PFTRACE") else { return };
    let d = common::decode_pftrace(&std::fs::read(&path).unwrap());
    println!(
        "clock snapshot {:?}, primary clock {:?}, timed packets without the clock: {}",
        d.clock_snapshot, d.primary_clock, d.packets_without_clock
    );
    let mut per_track: BTreeMap<u64, (usize, usize, u64)> = BTreeMap::new();
    for s in &d.slices {
        let e = per_track.entry(s.track).or_default();
        e.0 += 1;
        e.2 += s.end - s.start;
    }
    for s in &d.instants {
        per_track.entry(s.track).or_default().1 += 1;
    }
    let name = |t: u64| {
        let mut parts = Vec::new();
        let mut cur = Some(t);
        while let Some(c) = cur {
            let Some(tr) = d.tracks.get(&c) else { break };
            parts.push(tr.name.clone());
            cur = tr.parent;
        }
        parts.reverse();
        parts.join(" / ")
    };
    for (t, (slices, instants, ns)) in &per_track {
        println!("{:<90} {slices:>6} slices {instants:>6} instants {:>12} ns", name(*t), ns);
    }
    let flows: usize = d.slices.iter().chain(&d.instants).map(|s| s.terminating.len()).sum();
    let started: std::collections::HashSet<u64> =
        d.slices.iter().chain(&d.instants).flat_map(|s| s.flows.iter().copied()).collect();
    let ended: std::collections::HashSet<u64> =
        d.slices.iter().chain(&d.instants).flat_map(|s| s.terminating.iter().copied()).collect();
    println!("{} flows start, {} of them never end", started.len(), started.difference(&ended).count());
    println!(
        "{} tracks, {} slices, {} instants, {} counter values, {flows} flows ending at device work",
        d.tracks.len(),
        d.slices.len(),
        d.instants.len(),
        d.counters.len()
    );
    let mut names: BTreeMap<&str, usize> = BTreeMap::new();
    for s in d.slices.iter().chain(&d.instants) {
        *names.entry(&s.name).or_default() += 1;
    }
    for (n, c) in names.iter().filter(|(n, _)| !n.starts_with("ur")).take(30) {
        println!("  {c:>6}  {n}");
    }
    println!("problems: {:?}", d.problems);
    assert!(d.problems.is_empty());
    assert_eq!(d.packets_without_clock, 0);
    assert_eq!(started.difference(&ended).count(), 0, "every flow that starts ends");
}
