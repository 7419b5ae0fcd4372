#!/usr/bin/env python3
"""Compare per-stream, per-trace-type notification counts of two recordings of one run.

usage: compare_counts.py DUMP.jsonl REPORT.json [--markdown NAME]

DUMP.jsonl is what the reference full-dump subscriber (tools/xpti-dump) wrote; its last
line ("k": "exit") holds its counts. REPORT.json is `offtrace report --format json` of the trace
offtrace recorded in the same process (both subscribers loaded through XPTI_SUBSCRIBERS), so both
saw exactly the same notifications and the counts must be equal. Streams and types with a zero
count are ignored on both sides. Exit status: 0 if equal, 1 otherwise.
"""
import json
import sys

TT = {0: "unknown_type", 2: "graph_create", 4: "node_create", 6: "edge_create", 8: "region_begin",
      9: "region_end", 10: "task_begin", 11: "task_end", 12: "barrier_begin", 13: "barrier_end",
      14: "lock_begin", 15: "lock_end", 16: "signal", 18: "transfer_begin", 19: "transfer_end",
      20: "thread_begin", 21: "thread_end", 22: "wait_begin", 23: "wait_end", 24: "function_begin",
      25: "function_end", 26: "metadata", 28: "function_with_args_begin",
      29: "function_with_args_end", 32: "mem_alloc_begin", 33: "mem_alloc_end",
      34: "mem_release_begin", 35: "mem_release_end",
      36: "offload_alloc_memory_object_construct", 37: "offload_alloc_memory_object_destruct",
      38: "offload_alloc_memory_object_associate", 39: "offload_alloc_memory_object_release",
      40: "offload_alloc_accessor", 42: "queue_create", 43: "queue_destroy", 126: "diagnostics"}


def dump_counts(path):
    exit_line = None
    with open(path) as f:
        for line in f:
            if line.startswith('{"k":"exit"'):
                exit_line = json.loads(line)
    if exit_line is None:
        sys.exit(f"compare_counts: {path} has no exit line (the dump subscriber did not finish)")
    out = {}
    for stream, types in exit_line["counts"].items():
        for tt, n in types.items():
            if n:
                out[(stream, TT.get(int(tt), f"type_{tt}"))] = n
    return out


def report_counts(path):
    with open(path) as f:
        rep = json.load(f)
    out = {}
    for stream, types in rep["notifications"].items():
        for tt, n in types.items():
            if n:
                out[(stream, tt)] = n
    return out


def main():
    args = sys.argv[1:]
    name = None
    if "--markdown" in args:
        i = args.index("--markdown")
        name = args[i + 1]
        del args[i:i + 2]
    if len(args) != 2:
        sys.exit(__doc__)
    d, r = dump_counts(args[0]), report_counts(args[1])
    keys = sorted(set(d) | set(r))
    bad = [k for k in keys if d.get(k, 0) != r.get(k, 0)]
    if name:
        print(f"### {name}\n\n| stream | trace type | xpti-dump | offtrace | |\n|---|---|---:|---:|---|")
        for k in keys:
            print(f"| {k[0]} | {k[1]} | {d.get(k, 0)} | {r.get(k, 0)} | {'' if k not in bad else 'DIFFERENT'} |")
        print(f"\n{sum(d.values())} notifications seen by xpti-dump, {sum(r.values())} recorded by offtrace; "
              f"{len(keys)} (stream, type) pairs, {len(bad)} different.\n")
    else:
        for k in bad:
            print(f"DIFFERENT {k[0]} {k[1]}: xpti-dump {d.get(k, 0)}, offtrace {r.get(k, 0)}")
        print(f"compare_counts: {len(keys)} (stream, type) pairs, {len(bad)} different; "
              f"{sum(d.values())} vs {sum(r.values())} notifications")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
