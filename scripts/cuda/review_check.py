#!/usr/bin/env python3
"""Checks a trace of examples/cuda/review.py (`offtrace record`, exported with `offtrace export
--format csv -o CSV`) against what the program printed (`--out` JSON) and against torch.profiler's
trace of the same window (a second process, `--profile torch`). Reads only the CSV export, so it
checks what a user of the export sees; prints ok/FAIL per check, exits 1 on a failure.

    scripts/cuda/review_check.py CSV_DIR PROGRAM.json TORCH_TRACE.json

1. torch.compile: Triton kernels (`triton_*`) in the trace, each with a device time, each launched
   by a `cuLaunchKernel[Ex]` call in the trace; in the window, the same names with the same count
   as torch.profiler; the code objects (CUDA modules) loaded.
2. Streams: the window's pinned copies (direction, bytes, count) on one queue, the matmuls on
   another, copies overlapping matmuls in device time, no two commands of a queue overlapping.
3. Memory: the trace's device and host allocations against torch.cuda's allocator statistics.
"""
import collections
import csv
import json
import sys

FAILS = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILS.append(what)


def rows(d, name):
    with open(f"{d}/{name}.csv", newline="") as f:
        return list(csv.DictReader(f))


def main():
    d, prog_path, torch_path = sys.argv[1:4]
    prog = json.load(open(prog_path))
    kinds = {r["kind"]: r["name"] for r in rows(d, "kinds")}
    ops = {(r["kind"], r["operation"]): r["name"] for r in rows(d, "operations")}
    acts = rows(d, "device_activity")
    for a in acts:
        a["k"] = kinds.get(a["kind"], a["kind"])
        for f in ("device_start_ns", "device_end_ns", "bytes"):
            a[f] = int(a[f]) if a[f] else 0
    calls = rows(d, "api_calls")
    call_of = {c["correlation"]: ops.get((c["kind"], c["operation"]), "?") for c in calls}
    marks = rows(d, "markers")
    w = [int(m["ts_ns"]) for m in marks if m["message"] == "window"]
    check(len(w) == 2, f"NVTX range 'window' in the trace ({len(w)} marker records)")
    ws, we = min(w), max(w)
    inw = [a for a in acts if a["device_start_ns"] >= ws and a["device_end_ns"] <= we and a["device_end_ns"] > 0]

    # 1. torch.compile
    print("\n1. torch.compile")
    tri = [a for a in acts if a["k"] == "KERNEL_DISPATCH" and a["name"].startswith("triton_")]
    names = collections.Counter(a["name"] for a in tri)
    print(f"Triton kernels in the trace: {len(tri)} of {len(names)} names:", dict(names))
    check(len(tri) > 0, "Triton kernels are in the trace, by their Inductor names")
    timed = [a for a in tri if a["device_end_ns"] > a["device_start_ns"] > 0]
    check(len(timed) == len(tri), f"every Triton kernel has a device time ({len(timed)} of {len(tri)})")
    by = collections.Counter(call_of.get(a["correlation"], "none") for a in tri)
    print("calls the Triton kernels carry the correlation of:", dict(by))
    check(set(by) <= {"cuLaunchKernel", "cuLaunchKernelEx"},
          "every Triton kernel carries the correlation id of a cuLaunchKernel[Ex] call in the trace")
    mods = rows(d, "code_objects")
    loads = [m for m in mods if m["phase"] == "3"]
    print(f"code objects: {len(mods)} records, {len(loads)} loads, sizes {sorted(int(m['size']) for m in loads)}")
    check(len(loads) >= len(names), f"a code object load per Triton kernel at least ({len(loads)} loads, {len(names)} names)")
    tr = json.load(open(torch_path))
    evs = tr["traceEvents"] if isinstance(tr, dict) else tr
    tk = collections.Counter(e["name"] for e in evs if e.get("ph") == "X" and e.get("cat") == "kernel")
    ok = collections.Counter(a["name"] for a in inw if a["k"] == "KERNEL_DISPATCH")
    ttri = {n: c for n, c in tk.items() if n.startswith("triton_")}
    otri = {n: c for n, c in ok.items() if n.startswith("triton_")}
    print("window, Triton kernels: offtrace", otri, "torch.profiler", ttri)
    check(otri == ttri and otri, f"window: the same Triton kernels with the same count as torch.profiler ({sum(otri.values())} / {sum(ttri.values())})")
    check(sum(ok.values()) == sum(tk.values()), f"window: all kernels, offtrace {sum(ok.values())} = torch.profiler {sum(tk.values())}")
    diff = {n: (ok.get(n, 0), tk.get(n, 0)) for n in set(ok) | set(tk) if ok.get(n, 0) != tk.get(n, 0)}
    if diff:
        print("  names whose count differs (offtrace, torch):", diff)

    # 2. Streams
    print("\n2. Streams")
    pw = prog["window"]
    cp = [a for a in inw if a["k"] == "MEMORY_COPY"]
    pinned = [a for a in cp if "Pinned" in a["name"]]
    byname = collections.Counter((a["name"], a["bytes"], a["queue"]) for a in pinned)
    print("window, pinned copies (name, bytes, queue): count:", dict(byname))
    h = [a for a in pinned if a["direction"] == "HOST_TO_DEVICE" and a["src_type"] == "HOST"]
    g = [a for a in pinned if a["direction"] == "DEVICE_TO_HOST" and a["dst_type"] == "HOST"]
    check(len(h) == pw["htod_pinned"]["count"] and all(a["bytes"] == pw["htod_pinned"]["bytes"] for a in h),
          f"HtoD pinned copies: {len(h)} x {h[0]['bytes'] if h else 0} B = the program's {pw['htod_pinned']['count']} x {pw['htod_pinned']['bytes']} B")
    check(len(g) == pw["dtoh_pinned"]["count"] and all(a["bytes"] == pw["dtoh_pinned"]["bytes"] for a in g),
          f"DtoH pinned copies: {len(g)} x {g[0]['bytes'] if g else 0} B = the program's {pw['dtoh_pinned']['count']} x {pw['dtoh_pinned']['bytes']} B")
    cq = {a["queue"] for a in pinned}
    check(len(cq) == 1, f"the pinned copies are on one queue, the copy stream's ({sorted(cq)})")
    queues = collections.defaultdict(list)
    for a in inw:
        queues[a["queue"]].append(a)
    mm = [a for a in inw if a["k"] == "KERNEL_DISPATCH" and "sgemm_256x128_8x4_nn" in a["name"]]
    mmq = collections.Counter(a["queue"] for a in mm)
    print("window, the matmul kernel per queue:", dict(mmq))
    comp = [q for q, n in mmq.items() if q not in cq and n >= pw["matmuls_on_compute_stream"]]
    check(len(comp) == 1 and mmq[comp[0]] == pw["matmuls_on_compute_stream"] if comp else False,
          f"the compute stream's queue has the program's {pw['matmuls_on_compute_stream']} matmuls (a queue other than the copies')")
    if comp:
        cmm = [a for a in queues[comp[0]] if a["k"] == "KERNEL_DISPATCH"]
        ov = sum(1 for c in h if any(k["device_start_ns"] < c["device_end_ns"] and c["device_start_ns"] < k["device_end_ns"] for k in cmm))
        ovns = sum(max(0, min(c["device_end_ns"], k["device_end_ns"]) - max(c["device_start_ns"], k["device_start_ns"])) for c in h for k in cmm)
        check(ov == len(h) and ov > 0, f"each HtoD copy overlaps kernels of the compute stream in device time ({ov} of {len(h)}, {ovns / 1e6:.3f} ms together)")
    bad = 0
    for q, l in queues.items():
        l = sorted(l, key=lambda a: a["device_start_ns"])
        bad += sum(1 for x, y in zip(l, l[1:]) if y["device_start_ns"] < x["device_end_ns"])
    allq = collections.defaultdict(list)
    for a in acts:
        if a["device_end_ns"] > 0 and a["k"] != "SYNC":
            allq[a["queue"]].append(a)
    badall = 0
    for q, l in allq.items():
        l = sorted(l, key=lambda a: a["device_start_ns"])
        badall += sum(1 for x, y in zip(l, l[1:]) if y["device_start_ns"] < x["device_end_ns"])
    print("commands per queue (whole trace):", {q: len(l) for q, l in allq.items()})
    check(badall == 0, f"no two commands of one queue overlap in device time (whole trace: {badall} overlapping pairs)")

    # 3. Memory
    print("\n3. Memory")
    al = prog["allocator"]
    st = al["stats"]
    mem = rows(d, "memory")
    dev = [m for m in mem if m["op"] == "alloc" and m["memory_type"] == "DEVICE"]
    host = [m for m in mem if m["op"] == "alloc" and m["memory_type"] == "HOST"]
    frees = [m for m in mem if m["op"] == "free"]
    size = {m["address"]: (int(m["bytes"]), m["memory_type"]) for m in mem if m["op"] == "alloc"}
    live = peak = 0
    live_t = collections.Counter()
    peak_t = collections.Counter()
    for m in sorted(mem, key=lambda m: int(m["ts_ns"])):
        b, t = size.get(m["address"], (0, "?")) if m["op"] == "free" else (int(m["bytes"]), m["memory_type"])
        sgn = 1 if m["op"] == "alloc" else -1
        live += sgn * b
        live_t[t] += sgn * b
        peak = max(peak, live)
        peak_t[t] = max(peak_t[t], live_t[t])
    small = [m for m in dev if int(m["bytes"]) % (2 << 20)]
    print(f"trace: {len(dev)} device allocations ({sum(int(m['bytes']) for m in dev)} B), {len(host)} host, {len(frees)} frees; "
          f"peak live {peak} B (device {peak_t['DEVICE']}, host {peak_t['HOST']}); live at the end {live} B")
    print(f"torch: {st['num_device_alloc']} cudaMalloc segments, {st['num_device_free']} freed, max_memory_reserved "
          f"{al['max_memory_reserved']}, max_memory_allocated {al['max_memory_allocated']}, reserved at the end "
          f"{al['memory_reserved_end']}; pinned host {al['pinned_host_buffers']} x {al['pinned_host_bytes_each']}")
    print(f"device allocations not a multiple of 2 MiB (not the caching allocator's segments): {[int(m['bytes']) for m in small]}")
    check(len(host) == al["pinned_host_buffers"] and all(int(m["bytes"]) == al["pinned_host_bytes_each"] for m in host),
          f"host allocations = the pinned buffers ({len(host)})")
    check(len(frees) == st["num_device_free"], f"device frees = the allocator's cudaFree count ({len(frees)} / {st['num_device_free']})")
    check(len(dev) >= st["num_device_alloc"], f"device allocations >= the allocator's segments ({len(dev)} / {st['num_device_alloc']}; "
          f"the rest are libraries' own cudaMalloc)")
    big = sorted(int(m["bytes"]) for m in dev)[-2:]
    check(big == [256 << 20, 512 << 20], f"part 3's two tensors are two segments of their exact sizes ({big})")
    check(peak_t["DEVICE"] >= al["max_memory_reserved"], f"the trace's device peak ({peak_t['DEVICE']}) >= max_memory_reserved "
          f"({al['max_memory_reserved']}): the trace sees segments, never tensors (max_memory_allocated {al['max_memory_allocated']})")
    print("\nreview_check:", "all ok" if not FAILS else f"{len(FAILS)} failed")
    sys.exit(1 if FAILS else 0)


if __name__ == "__main__":
    main()
