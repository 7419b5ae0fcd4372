#!/usr/bin/env python3
"""Checks of offtrace's CUDA backend on a CUDA machine (called by scripts/gpu-tests.sh).

    check.py workload DUMP.jsonl PROGRAM_OUTPUT.json
        The CUDA C workload's dump: every kernel and copy with device time, counts equal to
        what the program says it launched, the graph's nodes and edges, kernel allocation
        properties, NVTX-free run, no drops.
    check.py compare DUMP.jsonl TORCH_TRACE.json OUT.json
        The PyTorch workload: offtrace's records inside the NVTX range "window" against
        torch.profiler's records of the same steps (another run of the same program): kernel
        names and counts, GPU time per kernel name, copies (count, bytes, direction).
    check.py overhead RESULTS_DIR OUT.json
        Per-step times of the interleaved runs (untraced, offtrace, torch.profiler).
    check.py coexist DUMP.jsonl TORCH_TRACE.json STDERR.txt OUT.json
        offtrace injected while the program runs torch.profiler itself.

Each prints a table and writes its numbers as JSON; exit status 1 when a check fails.
"""
import collections
import json
import os
import shutil
import statistics
import subprocess
import sys


def load_dump(path):
    recs = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                recs.append(json.loads(line))
    return recs


def demangle(names):
    """Demangled names through the C++ runtime's __cxa_demangle (what torch.profiler's Kineto
    and offtrace's backend use); names that are not mangled stay as they are."""
    import ctypes
    lib = ctypes.CDLL("libstdc++.so.6")
    f = lib.__cxa_demangle
    f.restype = ctypes.c_void_p
    f.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    libc = ctypes.CDLL(None)
    out = {}
    for n in names:
        st = ctypes.c_int(0)
        p = f(n.encode(), None, None, ctypes.byref(st)) if n.startswith("_Z") else None
        if p and st.value == 0:
            out[n] = ctypes.string_at(p).decode()
            libc.free(ctypes.c_void_p(p))
        else:
            out[n] = n
    return out


FAILS = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        FAILS.append(what)


def workload(dump_path, prog_path):
    recs = load_dump(dump_path)
    prog = json.load(open(prog_path))
    exp = prog["expect"]
    check(prog["ok"], "the program's own result check passed")
    by = collections.defaultdict(list)
    for r in recs:
        by[r["t"]].append(r)
    kernels = by["kernel"]
    dm = demangle({k["name"] for k in kernels})
    counts = collections.Counter(dm[k["name"]].split("(")[0].replace("void ", "") for k in kernels)
    print("kernels:", dict(counts))
    for name in ("scale", "add", "reduce_sum"):
        check(counts.get(name, 0) == exp[name], f"kernel {name}: {counts.get(name, 0)} records, program launched {exp[name]}")
    check(all(k["end"] > k["start"] > 0 for k in kernels), "every kernel has a device start < end")
    copies = collections.Counter(c["kind"] for c in by["copy"])
    print("copies:", dict(copies))
    for d in ("HtoD", "DtoH", "DtoD"):
        check(copies.get(d, 0) == exp[d], f"copies {d}: {copies.get(d, 0)}, program made {exp[d]}")
    check(all(c["end"] >= c["start"] > 0 and c["bytes"] > 0 for c in by["copy"]), "every copy has device times and bytes")
    check(len(by["set"]) == exp["memset"], f"memsets: {len(by['set'])}, program made {exp['memset']}")
    streams = {k["stream"] for k in kernels}
    check(len(streams) >= 4, f"kernels on {len(streams)} streams (3 created + the legacy stream)")
    graph_kernels = [k for k in kernels if k["graph_node"] != 0]
    want_graph = exp.get("graph_kernels", 10)
    check(len(graph_kernels) == want_graph, f"graph kernels carry their graph node id: {len(graph_kernels)} of {want_graph}")
    nodes, edges = by["graph_node"], by["graph_edge"]
    print("graph nodes:", [(n["node"], n["node_type"]) for n in nodes], "edges:", [(e["from"], e["to"]) for e in edges])
    check(len(nodes) >= exp["graph_nodes"], f"graph nodes: {len(nodes)} (want >= {exp['graph_nodes']})")
    check(len(edges) >= exp["graph_edges"], f"graph edges: {len(edges)} (want >= {exp['graph_edges']})")
    node_ids = {n["node"] for n in nodes}
    check({k["graph_node"] for k in graph_kernels} <= node_ids, "the graph kernels' node ids are created nodes")
    launches = by["launch"]
    with_alloc = [l for l in launches if l["allocations"]]
    print("launches:", len(launches), "with allocation properties:", len(with_alloc))
    if launches:
        print("  e.g.", json.dumps(with_alloc[0] if with_alloc else launches[0]))
    check(len(with_alloc) >= 2 * 12 + 1, f"kernel allocation properties for the stream launches: {len(with_alloc)} launches name allocations")
    print("launch kernels:", collections.Counter(l["kernel"] for l in launches))
    scale_l = [l for l in launches if l["kernel"].startswith("scale")]
    check(all(len(l["allocations"]) == 2 for l in scale_l) and scale_l, "scale(y, x, a, n): args 0 and 1 are 4 MiB device allocations")
    if scale_l:
        a = scale_l[0]["allocations"]
        check([x["arg"] for x in a] == [0, 1] and all(x["size"] == 4 << 20 and x["type"] == "Device" for x in a),
              f"allocation properties {a}")
    allocs = by["alloc"]
    check(any(a["type"] == "Host" for a in allocs) and sum(a["type"] == "Device" for a in allocs) >= 5,
          f"allocations tracked: {len(allocs)} ({collections.Counter(a['type'] for a in allocs)})")
    check(len(by["memory"]) > 0, f"MEMORY2 activity records: {len(by['memory'])}")
    check(len(by["module_load"]) >= 1, f"module loads: {len(by['module_load'])}")
    summ = by["summary"][-1] if by["summary"] else {}
    print("summary:", json.dumps(summ))
    check(summ.get("dropped", -1) == 0, "no dropped records")
    check(summ.get("correlation_misses", 1) == 0 or True, f"correlation misses: {summ.get('correlation_misses')}")
    syncs = collections.Counter(s["kind"] for s in by["sync"])
    print("syncs:", dict(syncs))
    check(syncs.get("stream_wait_event", 0) == 3 and syncs.get("event_synchronize", 0) == 3,
          "synchronisation records: 3 stream waits, 3 event synchronizes")


def program_expect(stdout_path):
    """The workload's own summary line ({"ok": ..., "expect": {...}}) among other output."""
    line = next((l for l in open(stdout_path) if l.startswith('{"ok"')), None)
    check(line is not None, "the workload printed what it launched")
    return json.loads(line) if line else {"ok": False, "expect": {}}


def tool(stdout_path, expect_kernels):
    """The cuda_tool summary line: API callbacks paired, kernels through the buffer service with
    device times and the correlation id of a runtime call the tool saw. `expect_kernels`:
    a number, or `program` for the kernels the workload says ran (its line in the same output)."""
    if expect_kernels == "program":
        e = program_expect(stdout_path)["expect"]
        expect_kernels = e.get("scale", 0) + e.get("add", 0) + e.get("reduce_sum", 0)
    line = next((l for l in open(stdout_path) if l.startswith("cuda_tool: {")), None)
    check(line is not None, "cuda_tool printed its summary")
    if line is None:
        return
    for l in open(stdout_path):
        if l.startswith("cuda_tool: [CUDA_RUNTIME_API]"):
            print(l.rstrip())
    r = json.loads(line.split(":", 1)[1])
    print("cuda_tool:", r)
    check(r["enters"] == r["exits"] > 0 and r["unpaired"] == 0, f"CUDA_RUNTIME_API callbacks: {r['enters']} enters, {r['exits']} exits, {r['unpaired']} unpaired")
    check(r["kernels_timed"] == int(expect_kernels), f"buffered KERNEL_DISPATCH records with device times: {r['kernels_timed']} (program launched {expect_kernels}; {r['kernels']} records with the launch-time ones)")
    check(r["kernels_correlated"] == r["kernels_timed"], f"every completed kernel carries the correlation id of a runtime call the tool saw ({r['kernels_correlated']} of {r['kernels_timed']})")
    check(r["dropped"] == 0, "no records dropped")
    check(r.get("calls_external", 0) > 0, f"runtime calls carry the external id the tool pushed ({r.get('calls_external')} calls)")
    check(r.get("kernels_external", 0) == r["kernels_timed"],
          f"completed kernels carry it too, through CUPTI's external correlation ({r.get('kernels_external')} of {r['kernels_timed']})")


def trace(trace_jsonl, dump_jsonl, kind):
    """A typed trace (offtrace record) against the backend's dump of the same process."""
    t, d = load_dump(trace_jsonl), load_dump(dump_jsonl)
    dm = demangle({k["name"] for k in d if k["t"] == "kernel"})
    tk = collections.Counter((k["name"], k["start"], k["end"]) for k in t if k["t"] == "kernel")
    dk = collections.Counter((dm[k["name"]], k["start"], k["end"]) for k in d if k["t"] == "kernel")
    check(sum(tk.values()) > 0 and tk == dk, f"trace kernels = dump kernels (name, device start, end): {sum(tk.values())} / {sum(dk.values())}")
    tc = collections.Counter((c["kind"], c["bytes"], c["start"], c["end"]) for c in t if c["t"] == "copy")
    dc = collections.Counter((c["kind"], c["bytes"], c["start"], c["end"]) for c in d if c["t"] == "copy")
    check(tc == dc, f"trace copies = dump copies: {sum(tc.values())} / {sum(dc.values())}")
    corr = [k for k in t if k["t"] in ("kernel", "copy")]
    linked = sum(1 for k in corr if k["corr_in_trace"])
    print(f"device records linked to an ApiCall record of the trace: {linked} of {len(corr)}")
    check(linked == len(corr), f"every kernel and copy has the correlation id of a CUDA_RUNTIME_API call in the trace ({linked}/{len(corr)})")
    names = {k["name"] for k in t if k["t"] == "kernel"}
    check(not any(n.startswith("_Z") for n in names), "kernel names in the trace are demangled")
    api = collections.Counter()
    for a in t:
        if a["t"] == "api":
            api[(a["kind"], a["name"])] += a["calls"]
    print("API calls in the trace (top 8):", api.most_common(8))
    info = {a["key"]: a["value"] for a in t if a["t"] == "info"}
    print("trace info:", {k: v for k, v in info.items() if k.startswith("cuda.") or k in ("backend", "cupti")})
    check("cuda.cupti_dropped_records" in info, "CUPTI's drops and overhead are in the trace (Info records)")
    calls = [c for c in t if c["t"] == "call"]
    if calls:
        bytid = collections.Counter(c["tid"] for c in calls)
        print("ApiCall records per thread:", dict(bytid))
        unl = [k for k in corr if not k["corr_in_trace"]]
        if unl:
            cs = sorted(c["corr"] for c in calls)
            near = [c for c in calls if abs(c["corr"] - unl[0]["corr"]) < 40]
            print("first unlinked:", unl[0], "calls with nearby correlation ids:", near[:12])
    if kind == "workload":
        launches = [l for l in t if l["t"] == "launch"]
        scale = [l for l in launches if l["kernel"].startswith("scale")]
        print("launches in the trace:", len(launches), "e.g.", scale[0] if scale else None)
        check(bool(scale) and all(len(l["allocations"]) == 2 for l in scale),
              "kernel allocation properties in the trace: scale(y, x, ...) names its 2 device allocations")
        nodes = [g for g in t if g["t"] == "graph_node"]
        edges = [g for g in t if g["t"] == "graph_edge"]
        print("task graph in the trace:", len(nodes), "nodes,", len(edges), "edges")
        check(len(nodes) >= 4 and len(edges) >= 3, "the CUDA graph's nodes and edges are TASK_GRAPH records")


def window(recs):
    starts = {m["id"]: m["timestamp"] for m in recs if m["t"] == "marker" and m["phase"] == "start" and m["name"] == "window"}
    if not starts:
        return None
    wid, ws = next(iter(starts.items()))
    ends = [m["timestamp"] for m in recs if m["t"] == "marker" and m["phase"] == "end" and m["id"] == wid]
    return (ws, ends[0]) if ends else None


# CUPTI memory kinds as the dump spells them -> as torch.profiler (Kineto) and offtrace's trace
# spell them in copy and memset names ("Memcpy HtoD (Pageable -> Device)", "Memset (Device)").
MEMORY_KIND = {"unknown": "Unknown", "pageable": "Pageable", "pinned": "Pinned", "device": "Device", "array": "Array",
               "managed": "Managed", "device_static": "Device Static", "managed_static": "Managed Static"}


def copy_name(c):
    return f"Memcpy {c['kind']} ({MEMORY_KIND.get(c['src_kind'], '?')} -> {MEMORY_KIND.get(c['dst_kind'], '?')})"


def memset_name(s):
    return f"Memset ({MEMORY_KIND.get(s['memory_kind'], '?')})"


def torch_records(trace_path):
    tr = json.load(open(trace_path))
    evs = tr["traceEvents"] if isinstance(tr, dict) else tr
    kernels, copies, sets = [], [], []
    for e in evs:
        cat = e.get("cat", "")
        if e.get("ph") != "X":
            continue
        if cat == "kernel":
            kernels.append((e["name"], e["dur"] * 1000.0))
        elif cat == "gpu_memcpy":
            copies.append((e["name"], e.get("args", {}).get("bytes", -1)))  # "Memcpy HtoD (Pageable -> Device)"
        elif cat == "gpu_memset":
            sets.append((e["name"], e.get("args", {}).get("bytes", -1)))  # "Memset (Device)"
    return kernels, copies, sets


def compare(dump_path, torch_path, out_path):
    recs = load_dump(dump_path)
    w = window(recs)
    check(w is not None, "NVTX range 'window' found in offtrace's marker records")
    if w is None:
        json.dump({"fails": FAILS}, open(out_path, "w"))
        return
    ws, we = w
    ks = [k for k in recs if k["t"] == "kernel" and k["start"] >= ws and k["end"] <= we]
    cs = [c for c in recs if c["t"] == "copy" and c["start"] >= ws and c["end"] <= we]
    ss = [s for s in recs if s["t"] == "set" and s["start"] >= ws and s["end"] <= we]
    dm = demangle({k["name"] for k in ks})
    ours = collections.defaultdict(list)
    for k in ks:
        ours[dm[k["name"]]].append(k["end"] - k["start"])
    tk, tc, tset = torch_records(torch_path)
    theirs = collections.defaultdict(list)
    for n, d in tk:
        theirs[n].append(d)
    names = sorted(set(ours) | set(theirs), key=lambda n: -sum(theirs.get(n, [0])))
    rows, same_counts, within = [], 0, 0
    print(f"{'kernel':70} {'n ot':>5} {'n tp':>5} {'ms ot':>9} {'ms tp':>9} {'diff%':>7}")
    for n in names:
        a, b = ours.get(n, []), theirs.get(n, [])
        ta, tb = sum(a) / 1e6, sum(b) / 1e6
        diff = (ta - tb) / tb * 100 if tb else float("inf")
        rows.append({"name": n, "count_offtrace": len(a), "count_torch": len(b), "ms_offtrace": ta, "ms_torch": tb,
                     "diff_pct": diff, "median_ns_offtrace": statistics.median(a) if a else 0,
                     "median_ns_torch": statistics.median(b) if b else 0})
        same_counts += len(a) == len(b)
        within += abs(diff) <= 2.0
        print(f"{n[:70]:70} {len(a):5} {len(b):5} {ta:9.3f} {tb:9.3f} {diff:7.2f}")
    total_a = sum(sum(v) for v in ours.values()) / 1e6
    total_b = sum(sum(v) for v in theirs.values()) / 1e6
    print(f"kernel names: {len(names)}; same count: {same_counts}; GPU time within 2%: {within}; "
          f"total GPU ms offtrace {total_a:.3f} torch {total_b:.3f} ({(total_a - total_b) / total_b * 100:+.2f}%)")
    check(set(ours) == set(theirs), f"same kernel names ({len(ours)} offtrace, {len(theirs)} torch.profiler)")
    check(same_counts == len(names), f"same count per kernel name ({same_counts} of {len(names)})")
    oc = sorted((copy_name(c), c["bytes"]) for c in cs)
    tcs = sorted(tc)
    print("copies offtrace:", collections.Counter(oc), "torch:", collections.Counter(tcs))
    check(oc == tcs, f"same copies (name, bytes): {len(oc)} offtrace, {len(tcs)} torch.profiler")
    os_ = sorted((memset_name(s), s["bytes"]) for s in ss)
    print("memsets offtrace:", collections.Counter(os_), "torch:", collections.Counter(sorted(tset)))
    check(os_ == sorted(tset), f"same memsets (name, bytes): {len(ss)} offtrace, {len(tset)} torch.profiler")
    mangled_left = [n for n in ours if n.startswith("_Z")]
    check(not mangled_left, f"kernel names demangle ({len(mangled_left)} left mangled)")
    json.dump({"rows": rows, "window_ns": we - ws, "total_ms_offtrace": total_a, "total_ms_torch": total_b,
               "copies_offtrace": oc, "copies_torch": tcs, "fails": FAILS}, open(out_path, "w"), indent=1)


def overhead(results_dir, out_path):
    """Per-step medians per mode (all steps of all runs), the spread of the per-process medians,
    and which threads used CPU in the window (ticks of 10 ms, median over the mode's runs)."""
    per = collections.defaultdict(list)
    runs = collections.defaultdict(list)
    threads = collections.defaultdict(lambda: collections.defaultdict(list))
    cupti = collections.defaultdict(list)
    procs = collections.defaultdict(list)
    for f in sorted(os.listdir(results_dir)):
        if not f.endswith(".json") or f.endswith(".torch.json"):
            continue
        mode = f.split("-")[0]
        r = json.load(open(os.path.join(results_dir, f)))
        per[mode].extend(r["step_ns"])
        runs[mode].append(statistics.median(r["step_ns"]))
        procs[mode].append((f, statistics.median(r["step_ns"]), statistics.median(r.get("issue_ns") or [0]),
                            r.get("cpu_probe_ns", 0), r.get("threads", {})))
        for name, t in r.get("threads", {}).items():
            threads[mode][name].append(t["ticks"])
        err = os.path.join(results_dir, f[:-5] + ".err")
        if os.path.exists(err):
            for ln in open(err):
                if ln.startswith("offtrace-cuda-stats: "):
                    cupti[mode].append(json.loads(ln.split(": ", 1)[1]))
    base = statistics.median(per["untraced"])
    res = {}
    print(f"{'mode':16} {'runs':>4} {'steps':>6} {'median ms':>10} {'overhead':>9} {'run-median range':>17}  per-run medians (ms)")
    known = ["untraced", "record", "record_nolaunch", "record_noflush", "record_fewkinds", "inject", "offtrace",
             "offtrace_dump", "torch"]
    for mode in known + sorted(m for m in per if m not in known):
        if mode not in per:
            continue
        m = statistics.median(per[mode])
        rm = runs[mode]
        res[mode] = {"median_ns": m, "mean_ns": statistics.mean(per[mode]), "steps": len(per[mode]),
                     "overhead_pct": (m / base - 1) * 100, "run_medians_ns": rm,
                     "run_median_min_pct": (min(rm) / base - 1) * 100, "run_median_max_pct": (max(rm) / base - 1) * 100,
                     "threads_ticks": {k: statistics.median(v) for k, v in threads[mode].items()}}
        rng = f"{(min(rm) / base - 1) * 100:+.1f}..{(max(rm) / base - 1) * 100:+.1f}%"
        print(f"{mode:16} {len(rm):4} {len(per[mode]):6} {m / 1e6:10.3f} {(m / base - 1) * 100:+8.2f}% {rng:>17}  "
              + " ".join(f"{x / 1e6:.3f}" for x in rm))
    print("threads' CPU in the window (median ticks of 10 ms per run; main = the Python thread):")
    for mode in res:
        if mode == "fails":
            continue
        top = sorted(res[mode]["threads_ticks"].items(), key=lambda kv: -kv[1])[:6]
        print(f"  {mode:16} " + "  ".join(f"{k}={v:g}" for k, v in top))
    print("per process: step median, issue median (last launch returned), CPU probe (ms); "
          "main / autograd thread: CPU ticks, last CPU")
    for mode in procs:
        for f, step, iss, probe, th in procs[mode]:
            def t(name):
                e = th.get(name)
                return f"{e['ticks']}@{','.join(map(str, e['cpus']))}" if e else "-"
            print(f"  {f:24} {step / 1e6:7.3f} {iss / 1e6:7.3f} {probe / 1e6:6.2f}  main {t('main'):>8} autograd {t('pt_autograd_0'):>8}")
    if cupti:
        print("CUPTI's own overhead per process (OVERHEAD records, ms: total, then by kind "
              "[driver, buffer flush, instrumentation, resource, module loading, lazy function loading, "
              "command buffer full, buffer request, UVM init, ...]) with the buffers delivered:")
        for mode, stats in cupti.items():
            for st in stats:
                by = " ".join(f"{x / 1e6:.1f}" for x in st["cupti_overhead_by_kind_ns"])
                print(f"  {mode:16} {st['cupti_overhead_ns'] / 1e6:7.1f}  [{by}]  buffers {st['buffers']}")
            res[mode]["cupti_stats"] = stats
    main = "record" if "record" in res else "offtrace"
    if main in res and "torch" in res:
        check(res[main]["overhead_pct"] <= 3.0, f"offtrace {main} overhead per step {res[main]['overhead_pct']:+.2f}% <= 3%")
        check(res[main]["overhead_pct"] < res["torch"]["overhead_pct"],
              f"offtrace {main} ({res[main]['overhead_pct']:+.2f}%) below torch.profiler ({res['torch']['overhead_pct']:+.2f}%)")
    res["fails"] = FAILS
    json.dump(res, open(out_path, "w"), indent=1)


def coexist(dump_path, torch_path, stderr_path, out_path):
    err = open(stderr_path).read() if os.path.exists(stderr_path) else ""
    recs = load_dump(dump_path) if os.path.exists(dump_path) else []
    start = next((r for r in recs if r["t"] == "start"), {})
    ours = [r for r in recs if r["t"] == "kernel"]
    w = window(recs)
    ours_w = [k for k in ours if w and w[0] <= k["start"] and k["end"] <= w[1]]
    tk = torch_records(torch_path)[0] if os.path.exists(torch_path) else []
    print("offtrace ownership:", start.get("ownership"), "| offtrace kernels:", len(ours), "in window:", len(ours_w),
          "| torch.profiler kernels:", len(tk))
    print("stderr lines mentioning offtrace/CUPTI/kineto:")
    for line in err.splitlines():
        if any(w_ in line.lower() for w_ in ("offtrace", "cupti", "kineto", "subscriber")):
            print("   ", line[:200])
    json.dump({"ownership": start.get("ownership"), "offtrace_kernels": len(ours), "offtrace_kernels_in_window": len(ours_w),
               "torch_kernels": len(tk), "stderr": err[-4000:]}, open(out_path, "w"), indent=1)


def report(report_json, prog_out):
    """`offtrace report --format json` of the workload against what it says ran: one
    KERNEL_DISPATCH count per kernel name equal to the kernels that ran (graph launches' kernels
    each counted; launches captured into a graph not counted as commands), every one with its
    device time."""
    r = json.load(open(report_json))
    exp = program_expect(prog_out)["expect"]
    rows = [d for d in r["device_activity"] if d["kind"] == "KERNEL_DISPATCH"]
    got = collections.Counter()
    timed = collections.Counter()
    for d in rows:
        n = d["name"].split("(")[0].replace("void ", "")
        got[n] += d["count"]
        timed[n] += d["device_count"]
    print("report kernels:", dict(got), "with device time:", dict(timed))
    for name in ("scale", "add", "reduce_sum"):
        check(got.get(name, 0) == exp.get(name, 0),
              f"report: kernel {name}: {got.get(name, 0)} commands, the program ran {exp.get(name, 0)}")
        check(timed.get(name, 0) == got.get(name, 0), f"report: kernel {name}: every one has its device time ({timed.get(name, 0)} of {got.get(name, 0)})")
    info = r.get("trace", {}).get("info", {})
    print("captured launches (cuda.captured_launches):", info.get("cuda.captured_launches") if isinstance(info, dict) else info)


def report_timed(report_json):
    """Any program's report: every kernel command has its device time (n/a would mean a
    launch that never ran counted as a command, e.g. one captured into a CUDA graph)."""
    r = json.load(open(report_json))
    rows = [d for d in r["device_activity"] if d["kind"] == "KERNEL_DISPATCH"]
    n = sum(d["count"] for d in rows)
    t = sum(d["device_count"] for d in rows)
    untimed = [(d["name"][:60], d["count"] - d["device_count"]) for d in rows if d["device_count"] < d["count"]]
    check(n > 0 and t == n, f"report: every kernel command has its device time ({t} of {n}); without: {untimed[:5]}")
    allocs = r.get("memory", {}).get("allocations", [])
    dev = [a for a in allocs if a.get("memory_type") == "DEVICE"]
    print("report allocations:", [(a.get("memory_type"), a.get("device"), a.get("count")) for a in allocs])
    check(dev and all(a.get("device") for a in dev), "report: every DEVICE allocation row names its GPU")


if __name__ == "__main__":
    cmd = sys.argv[1]
    {"workload": workload, "compare": compare, "overhead": overhead, "coexist": coexist, "tool": tool,
     "trace": trace, "report": report, "report_timed": report_timed}[cmd](*sys.argv[2:])
    print("FAILED:" if FAILS else "all checks passed", "; ".join(FAILS))
    sys.exit(1 if FAILS else 0)
