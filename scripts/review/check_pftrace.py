#!/usr/bin/env python3
"""An independent check of a Perfetto trace written by `offtrace export --format perfetto`.

Written from Perfetto's .proto files (field numbers below), sharing no code with offtrace's
encoder or its Rust test decoder: a plain varint walker. It checks what a viewer relies on and
prints what one would show.

  - every timed packet names its clock (timestamp_clock_id) and a ClockSnapshot states the
    primary trace clock;
  - track descriptors: unique uuids, parents that exist, a name (or a process/thread) each;
  - track events: on each track, after sorting by timestamp (as trace processor does), every
    SLICE_END closes a SLICE_BEGIN, no slice ends before it starts, and slices nest (no partial
    overlap); each slice and instant has a name; flows: every terminating flow id was started
    and every started one ends, each once.

With --flows it prints each flow as a viewer draws it, one line each:
`flow<TAB>source track path<TAB>source slice<TAB>target track path<TAB>target slice`, where a
flow id on an instant belongs to the slice enclosing the instant on its track (an anchor).

Usage: scripts/review/check_pftrace.py TRACE.pftrace [--tracks] [--flows]   (exit 1 on a problem)
"""
import collections
import sys

# Perfetto protos: protos/perfetto/trace/trace_packet.proto and friends.
TRACE_PACKET = 1
PKT_TIMESTAMP, PKT_CLOCK_SNAPSHOT, PKT_SEQ_ID, PKT_TRACK_EVENT = 8, 6, 10, 11
PKT_INTERNED, PKT_SEQ_FLAGS, PKT_CLOCK_ID, PKT_TRACK_DESC = 12, 13, 58, 60
SNAP_CLOCKS, SNAP_PRIMARY = 1, 2
TD_UUID, TD_NAME, TD_PROCESS, TD_THREAD, TD_PARENT, TD_COUNTER, TD_STATIC_NAME = 1, 2, 3, 4, 5, 8, 10
PD_PID, PD_NAME = 1, 6
THD_PID, THD_TID, THD_NAME = 1, 2, 5
TE_DEBUG, TE_TYPE, TE_NAME_IID, TE_TRACK_UUID, TE_NAME = 4, 9, 10, 11, 23
TE_COUNTER_VALUE, TE_DOUBLE_COUNTER_VALUE, TE_FLOW_IDS, TE_TERM_FLOW_IDS = 30, 44, 47, 48
TE_FLOW_IDS_OLD, TE_TERM_FLOW_IDS_OLD = 36, 42
SLICE_BEGIN, SLICE_END, INSTANT, COUNTER = 1, 2, 3, 4
CLOCKS = {1: "REALTIME", 2: "REALTIME_COARSE", 3: "MONOTONIC", 4: "MONOTONIC_COARSE",
          5: "MONOTONIC_RAW", 6: "BOOTTIME"}


def varint(b, i):
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        if c < 0x80:
            return v, i
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def fields(b):
    """(field, wire type, value) of a message: ints for varint/fixed, bytes for length-delimited."""
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        f, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(b, i)
        elif wt == 1:
            v, i = int.from_bytes(b[i:i + 8], "little"), i + 8
        elif wt == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
            if i > len(b):
                raise ValueError("length past the end")
        elif wt == 5:
            v, i = int.from_bytes(b[i:i + 4], "little"), i + 4
        else:
            raise ValueError(f"wire type {wt}")
        yield f, wt, v


def main():
    path = sys.argv[1]
    show_tracks = "--tracks" in sys.argv
    show_flows = "--flows" in sys.argv
    data = open(path, "rb").read()
    problems = []
    tracks = {}
    descs = {}
    events = collections.defaultdict(list)  # track -> [(ts, order, type, name, starts, ends)]
    flows_started, flows_ended = set(), []
    flow_from, flow_to = {}, {}  # flow id -> (track, the slice it belongs to)
    clock_ids = collections.Counter()
    primary = None
    timed_without_clock = 0
    packets = 0
    for order, (f, wt, pkt) in enumerate(fields(data)):
        if f != TRACE_PACKET or wt != 2:
            problems.append(f"top-level field {f} wire type {wt}")
            continue
        packets += 1
        pf = collections.defaultdict(list)
        for g, _, v in fields(pkt):
            pf[g].append(v)
        if PKT_CLOCK_SNAPSHOT in pf:
            for g, _, v in fields(pf[PKT_CLOCK_SNAPSHOT][0]):
                if g == SNAP_PRIMARY:
                    primary = v
        if PKT_TRACK_DESC in pf:
            td = collections.defaultdict(list)
            for g, _, v in fields(pf[PKT_TRACK_DESC][0]):
                td[g].append(v)
            uuid = td[TD_UUID][0] if td[TD_UUID] else None
            name = (td[TD_NAME] or td[TD_STATIC_NAME] or [b""])[0].decode("utf-8", "replace")
            kind = "track"
            if td[TD_PROCESS]:
                p = {g: v for g, _, v in fields(td[TD_PROCESS][0])}
                name = name or p.get(PD_NAME, b"").decode() or f"pid {p.get(PD_PID)}"
                kind = "process"
            if td[TD_THREAD]:
                t = {g: v for g, _, v in fields(td[TD_THREAD][0])}
                name = name or t.get(THD_NAME, b"").decode() or f"tid {t.get(THD_TID)}"
                kind = "thread"
            if td[TD_COUNTER]:
                kind = "counter"
            desc = bytes(pf[PKT_TRACK_DESC][0])
            if uuid in descs and descs[uuid] != desc:
                problems.append(f"track uuid {uuid:#x} described twice, differently")
            descs[uuid] = desc
            if not name:
                problems.append(f"track {uuid:#x} has no name")
            tracks[uuid] = (name, td[TD_PARENT][0] if td[TD_PARENT] else None, kind)
        if PKT_TRACK_EVENT in pf:
            ts = pf[PKT_TIMESTAMP][0] if pf[PKT_TIMESTAMP] else None
            if ts is not None:
                if pf[PKT_CLOCK_ID]:
                    clock_ids[pf[PKT_CLOCK_ID][0]] += 1
                else:
                    timed_without_clock += 1
            te = collections.defaultdict(list)
            for g, _, v in fields(pf[PKT_TRACK_EVENT][0]):
                te[g].append(v)
            typ = te[TE_TYPE][0] if te[TE_TYPE] else 0
            track = te[TE_TRACK_UUID][0] if te[TE_TRACK_UUID] else None
            name = te[TE_NAME][0].decode("utf-8", "replace") if te[TE_NAME] else None
            if te[TE_NAME_IID]:
                name = f"<iid {te[TE_NAME_IID][0]}>"
            if typ in (SLICE_BEGIN, INSTANT) and not name:
                problems.append(f"packet {packets}: a slice/instant without a name on track {track}")
            starts = te[TE_FLOW_IDS] + te[TE_FLOW_IDS_OLD]
            ends = te[TE_TERM_FLOW_IDS] + te[TE_TERM_FLOW_IDS_OLD]
            for v in starts:
                if v in flows_started:
                    problems.append(f"flow {v:#x} starts twice")
                flows_started.add(v)
            flows_ended.extend(ends)
            events[track].append((ts, order, typ, name, starts, ends))
    # Per track: sort as the trace processor does (by timestamp, stable), then pair.
    slices = instants = counters = 0
    per_track = {}
    for track, evs in events.items():
        if track not in tracks:
            problems.append(f"events on undescribed track {track}")
        evs.sort(key=lambda e: (e[0], e[1]))
        stack = []
        n = 0
        busy = 0
        for ts, _, typ, name, starts, ends in evs:
            # A flow belongs to the slice it is on, or to the one enclosing its instant.
            owner = name if typ == SLICE_BEGIN or not stack else stack[-1][1]
            for v in starts:
                flow_from[v] = (track, owner)
            for v in ends:
                flow_to[v] = (track, owner)
            if typ == SLICE_BEGIN:
                stack.append((ts, name))
            elif typ == SLICE_END:
                if not stack:
                    problems.append(f"track {tracks.get(track, ('?',))[0]!r}: END at {ts} with no open slice")
                    continue
                start, sname = stack.pop()
                if ts < start:
                    problems.append(f"track {tracks.get(track)}: {sname} ends before it starts")
                n += 1
                if not stack:
                    busy += ts - start
            elif typ == INSTANT:
                instants += 1
            elif typ == COUNTER:
                counters += 1
        if stack:
            problems.append(f"track {tracks.get(track, ('?',))[0]!r}: {len(stack)} slices never end")
        slices += n
        per_track[track] = (n, busy)
    # Pairing by stack after sorting equals pairing in file order only if the file's own pairing
    # nests; check nesting directly: intervals on a track, by file order of BEGIN/END.
    for track, evs in events.items():
        open_ = []
        ivs = []
        for ts, order, typ, name, _, _ in sorted(evs, key=lambda e: e[1]):
            if typ == SLICE_BEGIN:
                open_.append((ts, name))
            elif typ == SLICE_END and open_:
                s, nm = open_.pop()
                ivs.append((s, ts, nm))
        ivs.sort(key=lambda x: (x[0], -x[1]))
        ends = []
        for s, e, nm in ivs:
            while ends and ends[-1][0] <= s:
                ends.pop()
            if ends and e > ends[-1][0]:
                problems.append(
                    f"track {tracks.get(track, ('?',))[0]!r}: {nm!r} [{s}, {e}] overlaps {ends[-1][1]!r} ending {ends[-1][0]}")
            ends.append((e, nm))
    unmatched = [f for f in flows_ended if f not in flows_started]
    if unmatched:
        problems.append(f"{len(unmatched)} flows end that never began")
    unended = flows_started - set(flows_ended)
    if unended:
        problems.append(f"{len(unended)} flows begin that never end")
    if len(set(flows_ended)) != len(flows_ended):
        problems.append(f"{len(flows_ended) - len(set(flows_ended))} flow ends repeat a flow's end")
    if timed_without_clock:
        problems.append(f"{timed_without_clock} timed packets without timestamp_clock_id")
    print(f"{path}: {packets} packets, {len(tracks)} tracks, {slices} slices, {instants} instants, "
          f"{counters} counter values, {len(flows_ended)} flows ended / {len(flows_started)} begun")
    print(f"primary clock: {CLOCKS.get(primary, primary)}; packet clocks: "
          + ", ".join(f"{CLOCKS.get(c, c)} x{n}" for c, n in clock_ids.items()))
    def path_of(u):
        parts = []
        seen = set()
        while u is not None and u in tracks and u not in seen:
            seen.add(u)
            parts.append(tracks[u][0])
            u = tracks[u][1]
        return " / ".join(reversed(parts))
    if show_flows:
        for v in sorted(flow_from):
            if v in flow_to:
                (st, sn), (tt, tn) = flow_from[v], flow_to[v]
                print(f"flow\t{path_of(st)}\t{sn}\t{path_of(tt)}\t{tn}")
    if show_tracks:
        for u in sorted(tracks, key=path_of):
            n, busy = per_track.get(u, (0, 0))
            print(f"  {tracks[u][2]:8} {path_of(u)[:110]:110} {n:6} slices {busy / 1e6:10.3f} ms")
    for p in problems[:40]:
        print("PROBLEM:", p)
    if len(problems) > 40:
        print(f"... {len(problems) - 40} more problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
