#!/usr/bin/env python3
"""Where each kernel launch of a traced process came from (docs/cuda.md, "Run T: each launch delivered once").

usage: launch_sources.py DUMP.jsonl [TRACE.jsonl]

DUMP is the backend's OFFTRACE_CUDA_DUMP of `offtrace record` (defaults): a "launch" line per
launch-time dispatch (its function: the runtime launch call it came from, or a driver launch
with OFFTRACE_CUDA_LAUNCH_ARGS=driver), a "driver_launch" line per driver launch made outside
any traced runtime call (CUPTI's API activity record), and a "kernel" line per completed kernel
(cupti_corr). TRACE is `TRACE_JSONL_CALLS=1 trace_jsonl` of the same process: every kernel's
correlation id should name a call in the trace ("corr_in_trace")."""
import collections
import json
import sys


def lines(path):
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    yield json.loads(line)
                except ValueError:
                    pass


def main():
    dump = list(lines(sys.argv[1]))
    launches = [d for d in dump if d.get("t") == "launch"]
    driver = [d for d in dump if d.get("t") == "driver_launch"]
    kernels = [d for d in dump if d.get("t") == "kernel"]
    print("launch-time dispatches by launching function:",
          dict(collections.Counter(d["function"] for d in launches)))
    print("driver launches outside a runtime call (API activity records):",
          dict(collections.Counter(d["function"] for d in driver)))
    by_corr = {d["cupti_corr"] for d in driver}
    dispatched = {d["cupti_corr"] for d in launches}
    only_driver = collections.Counter(k["name"] for k in kernels if k["cupti_corr"] in by_corr)
    print(f"kernels: {len(kernels)}; launched from the runtime (a dispatch): "
          f"{sum(1 for k in kernels if k['cupti_corr'] in dispatched)}; "
          f"driver-only: {sum(only_driver.values())}; graph replays: "
          f"{sum(1 for k in kernels if k.get('graph_node'))}; no launching call: "
          f"{sum(1 for k in kernels if not k.get('corr'))}")
    print("driver-only kernels by name:")
    for name, n in only_driver.most_common():
        print(f"  {n:6d}  {name[:150]}")
    if len(sys.argv) > 2:
        trace = list(lines(sys.argv[2]))
        calls = {c["corr"]: c["name"] for c in trace if c.get("t") == "call"}
        tk = [k for k in trace if k.get("t") == "kernel"]
        linked = collections.Counter(calls.get(k["corr"], "(none)") for k in tk)
        print(f"trace: {len(tk)} kernels, {sum(1 for k in tk if k.get('corr_in_trace'))} carry the correlation "
              f"id of a call in the trace; by launching call: {dict(linked)}")


if __name__ == "__main__":
    main()
