#!/usr/bin/env python3
"""The hot path of functions in a callgrind run, instruction by instruction, with disassembly.

    scripts/callgrind-hot.py CALLGRIND_OUT OBJECT N NAME...

CALLGRIND_OUT: a file written with `--dump-instr=yes` (one per thread with
`--separate-threads=yes`: the emitting thread's is the largest); OBJECT: the binary or shared
object the functions are in (addresses in the file are relative to it, as `objdump -d` prints
them); N: the operations the run made (COST_N), so that counts print per operation; NAME: a
substring of the function names to show (e.g. `exit_callback_slow`, `offtrace_core`).

Prints, per matching function, its instructions per operation (self cost: callees excluded) and
every instruction that ran at least N/2 times, as `address count-per-op disassembly`: the path
each operation takes, which docs/overhead.md ("Where the instructions go") divides into steps.
"""
import collections
import re
import subprocess
import sys

path, obj, n, wanted = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
names = {}
fn = None
cost = collections.defaultdict(collections.Counter)
addr = 0
after_calls = False
for line in open(path, errors="replace"):
    line = line.rstrip("\n")
    if line.startswith("fn="):
        m = re.match(r"fn=\((\d+)\)(?: (.*))?", line)
        if m.group(2):
            names[m.group(1)] = m.group(2)
        fn = names[m.group(1)]
        continue
    if line.startswith(("cfn=", "cfi=", "cfl=")):
        m = re.match(r"cfn=\((\d+)\)(?: (.*))?", line)
        if m and m.group(2):
            names[m.group(1)] = m.group(2)
        continue
    if line.startswith("calls="):
        after_calls = True  # the next cost line is the call's inclusive cost
        continue
    if not line or line[0] not in "0123456789+-*":
        continue
    parts = line.split()
    a = parts[0]  # `positions: instr line`: absolute, +/- relative, or * (same)
    if a.startswith("0x"):
        addr = int(a, 16)
    elif a.startswith("+"):
        addr += int(a[1:])
    elif a.startswith("-"):
        addr -= int(a[1:])
    if after_calls:
        after_calls = False
        continue
    if len(parts) >= 3 and fn and any(w in fn for w in wanted):
        cost[fn][addr] += int(parts[2])

disassembly = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-C", obj], capture_output=True, text=True).stdout
text = {}
for line in disassembly.splitlines():
    m = re.match(r"\s+([0-9a-f]+):\s+(.*)", line)
    if m:
        text[int(m.group(1), 16)] = m.group(2)
for f, c in cost.items():
    total = sum(c.values()) / n
    if total < 0.5:
        continue
    print(f"== {f}: {total:.1f} per op")
    for a in sorted(c):
        if c[a] >= n * 0.5:
            print(f"  {a:x} {c[a] / n:4.1f}  {text.get(a, '?')}")
