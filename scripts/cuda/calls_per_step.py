"""API calls per name per training step of train.py, from two `OFFTRACE_CUDA_DUMP` files of the
same program run for N1 and N2 steps (no warm-up, every call traced: OFFTRACE_CUDA_ALL_CALLS=1
OFFTRACE_CUDA_DRIVER_API=1): the difference of the per-function counts over N2 - N1 steps is
what one steady step calls (start-up and the first steps cancel).

    python calls_per_step.py SHORT.jsonl N1 LONG.jsonl N2 [OUT.json]
"""
import json
import sys


def counts(path):
    c = {}
    for ln in open(path):
        r = json.loads(ln)
        if r.get("t") == "api":
            c[(r["kind"], r["name"])] = r["calls"]
    return c


def main(short, n1, long, n2, out=None):
    a, b = counts(short), counts(long)
    steps = int(n2) - int(n1)
    rows = sorted(((b.get(k, 0) - a.get(k, 0)) / steps, k) for k in set(a) | set(b))
    rows = [(n, k) for n, k in reversed(rows) if n > 0]
    total = {kind: sum(n for n, k in rows if k[0] == kind) for kind in {k[0] for _, k in rows}}
    print(f"calls per step ({steps} steps: {long} minus {short}); totals {total}")
    for n, (kind, name) in rows:
        print(f"  {n:9.1f}  {kind:17} {name}")
    if out:
        json.dump({"steps": steps, "totals": total, "per_step": [[kind, name, n] for n, (kind, name) in rows]},
                  open(out, "w"), indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:])
