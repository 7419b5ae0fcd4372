#!/usr/bin/env python3
"""Dynamic call counts and total instructions from a callgrind output file.

    scripts/callgrind-calls.py callgrind.out.PID [FUNCTION...]

With `--by-caller` first, also `caller FUNCTION CALLER N` per calling function.

Prints `total_ir N` and, per FUNCTION (default `__tls_get_addr`), `calls FUNCTION N`: the
calls to it from anywhere (the `calls=` lines under each `cfn=` naming it), what
`callgrind_annotate --tree=caller` lists per caller, summed. The cost harnesses run at N and 2N
and divide the difference by N (docs/overhead.md).
"""
import re
import sys

by_caller = sys.argv[1] == "--by-caller"
args = sys.argv[2:] if by_caller else sys.argv[1:]
path = args[0]
wanted = args[1:] or ["__tls_get_addr"]
callers = {}
fn = None
names = {}
calls = {w: 0 for w in wanted}
total = 0
cfn = None
for line in open(path, errors="replace"):
    if line.startswith("cfn="):
        m = re.match(r"cfn=\((\d+)\)(?: (.*))?", line.strip())
        if m:
            if m.group(2):
                names[m.group(1)] = m.group(2)
            cfn = names.get(m.group(1))
        else:
            cfn = line.strip()[4:]
    elif line.startswith("fn="):
        m = re.match(r"fn=\((\d+)\)(?: (.*))?", line.strip())
        if m and m.group(2):
            names[m.group(1)] = m.group(2)
        fn = names.get(m.group(1)) if m else line.strip()[3:]
    elif line.startswith("calls=") and cfn is not None:
        n = int(line.split("=")[1].split()[0])
        for w in wanted:
            if cfn == w or cfn.startswith(w + "'"):
                calls[w] += n
                callers[(w, fn)] = callers.get((w, fn), 0) + n
        cfn = None
    elif line.startswith("summary:") or line.startswith("totals:"):
        total = int(line.split()[1])
print(f"total_ir {total}")
for w in wanted:
    print(f"calls {w} {calls[w]}")
if by_caller:
    for (w, c), n in sorted(callers.items(), key=lambda kv: -kv[1]):
        print(f"caller {w} {c} {n}")
