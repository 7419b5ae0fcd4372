#!/usr/bin/env python3
"""Compare what an OpenCL program read from its own events with the trace's device times.

The program prints one line per command, `cmd THREAD SEQ LABEL ... START END` (the last two
fields: CL_PROFILING_COMMAND_START / _END, in enqueue order per program thread), as
`examples/opencl/ooo_threads.c --profile` and `pyopencl_two_contexts.py` do. The trace is read
from `offtrace export --format sqlite`: its `device_activity` rows, per enqueuing thread in
enqueue order. Each program thread is matched to the trace thread whose durations it equals.

Checks, per command: END - START equals the trace's device_ns to the ns; the trace's start minus
the program's START (the calibration's offset in use) is one of the trace's
`opencl.clock_offset_ns` samples (SQLite keeps them as REAL: to within a double's precision, which
for a runtime whose device clock counts from 1970, NVIDIA's, is 256 ns); every program command has a trace row and no trace row is left
over. Prints, per program label, the trace's (kind, name) and counts.

Usage: scripts/review/check_cl_profile.py PROGRAM_OUTPUT TRACE.sqlite   (exit 1 on a mismatch)
"""
import collections
import itertools
import sqlite3
import sys


def main(out_path, db_path):
    prog = collections.defaultdict(list)
    for line in open(out_path):
        f = line.split()
        if f and f[0] == "cmd":
            prog[f[1]].append((f[3], int(f[-2]), int(f[-1])))
    db = sqlite3.connect(db_path)
    rows = collections.defaultdict(list)
    # call_start: the start of the API call that enqueued the command (same correlation), the
    # earliest a runtime can start it; enqueue_ns is the launch record's, taken as that call
    # returns, after which a device may well have started the command.
    q = """select a.tid, k.name, a.name, a.device_start_ns, a.device_end_ns, a.device_ns, a.queue_id, a.enqueue_ns,
                  (select min(c.start_ns) from api_calls c where c.correlation = a.correlation)
           from device_activity a join kinds k on k.kind = a.kind order by a.tid, a.enqueue_ns, a.id"""
    early, before_call = [], []
    for tid, kind, name, s, e, d, qid, enq, call_start in db.execute(q):
        rows[tid].append((kind, name, s, e, d, qid))
        if s is not None and s < enq:
            early.append(enq - s)
        if s is not None and call_start is not None and s < call_start:
            before_call.append(call_start - s)
    offsets = {int(v) for (v,) in db.execute(
        "select s.value from counter_samples s join counters c using (counter) where c.name = 'opencl.clock_offset_ns'")}
    bad = 0
    pthreads, tids = sorted(prog), sorted(rows)
    if len(pthreads) != len(tids):
        print(f"program threads with commands: {len(pthreads)}, trace threads with device work: {len(tids)}")
        return 1

    def score(perm):
        return sum(a[2] - a[1] == b[4] for p, t in zip(pthreads, perm) for a, b in zip(prog[p], rows[t]))
    best = max(itertools.permutations(tids), key=score)
    names = collections.defaultdict(collections.Counter)
    for p, t in zip(pthreads, best):
        a, b = prog[p], rows[t]
        if len(a) != len(b):
            print(f"thread {p} (tid {t}): program {len(a)} commands, trace {len(b)}")
            bad += 1
        qids = {r[5] for r in b}
        if len(qids) != 1 and "queue" in sys.argv:
            print(f"thread {p}: queues {qids}")
        for i, ((label, ps, pe), (kind, name, s, e, d, _)) in enumerate(zip(a, b)):
            names[label][(kind, name)] += 1
            if d is None and ps == 0 and pe == 0:
                continue  # the runtime gave no times (NVIDIA's markers and barriers): none in the trace
            if d is None or pe - ps != d:
                print(f"thread {p} #{i} {label}: program END-START {pe - ps}, trace {kind} {name} {d}")
                bad += 1
            elif offsets and not any(abs(s - ps - o) <= max(1, abs(o) >> 52) for o in offsets):
                print(f"thread {p} #{i} {label}: trace start - program START = {s - ps}, no such offset sample")
                bad += 1
    total = sum(len(v) for v in prog.values())
    print(f"{total} program commands on {len(pthreads)} threads, {sum(len(v) for v in rows.values())} trace rows; "
          f"{len(offsets)} clock offsets")
    for label, c in names.items():
        print(f"  {label:12} -> " + ", ".join(f"{k} {n} ({m})" for (k, n), m in c.items()))
    # Not a mismatch with the program (which reads device times only), but where the calibration
    # placed a command on the host's clock: before the call that enqueued it.
    if early:
        print(f"note: {len(early)} commands start on the device before their launch record (taken as the "
              f"enqueue call returns; by up to {max(early) / 1000:.1f} us)")
    # Before the call that enqueued it began: impossible, so a calibration error.
    print(f"commands starting before their enqueue call began: {len(before_call)}"
          + (f" (by up to {max(before_call) / 1000:.1f} us)" if before_call else ""))
    if before_call and "strict" in sys.argv:
        bad += 1
    print("OK" if not bad else f"{bad} mismatches")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
