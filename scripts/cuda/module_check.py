#!/usr/bin/env python3
"""Every kernel the device ran belongs to a module whose code-object record names it.

Reads the CUDA backend's dumps (`OFFTRACE_CUDA_DUMP` JSON lines): each `module_load` line lists
the kernels its cubin's symbol table names (`crates/offtrace-cuda/src/cubin.rs`), each `kernel`
line is one kernel execution with CUPTI's (mangled) name. Checks that every executed kernel's
name is among the kernels of some loaded module, and prints how many modules named how many
kernels. Exit 1 on a kernel no module names, or when no module named any kernel.

Usage: scripts/cuda/module_check.py DUMP.jsonl [DUMP.jsonl ...]
"""
import json
import sys


def main(paths):
    bad = 0
    for path in paths:
        modules, named, ran = 0, set(), {}
        for line in open(path):
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if r.get("t") == "module_load":
                modules += 1
                named.update(r.get("kernels", []))
            elif r.get("t") == "kernel":
                ran[r["name"]] = ran.get(r["name"], 0) + 1
        missing = sorted(n for n in ran if n not in named)
        print(f"{path}: {modules} modules naming {len(named)} kernels; {sum(ran.values())} kernel executions "
              f"of {len(ran)} names, {len(missing)} names in no module")
        for n in missing[:10]:
            print(f"  not in any module: {n} ({ran[n]} executions)")
        if missing or not named:
            bad += 1
    print("FAIL" if bad else "ok")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
