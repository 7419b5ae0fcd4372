#!/usr/bin/env python3
"""Bytes the repeated definitions add to finished traces (format version 5, docs/format.md).

A finished recording ends with a chunk that holds the repeat of every definition and `End`;
this reads the chunk framing (no decoding) and prints, per trace, the records and bytes without
that chunk and with it. Usage: scripts/repeat_cost.py TRACE...
"""
import struct
import sys

HEADER, CHUNK_HEADER = 64, 24

print("| trace | records (without the repeat) | repeat: definitions, bytes | B/record without | with |")
print("|---|---:|---:|---:|---:|")
for path in sys.argv[1:]:
    b = open(path, "rb").read()
    at, chunks = HEADER, []
    while b[at:at + 4] == b"OTCK":
        stored, _raw, count = struct.unpack_from("<III", b, at + 8)
        chunks.append((CHUNK_HEADER + stored, count))
        at += CHUNK_HEADER + stored
    if b[at:at + 4] != b"OTEN":
        sys.exit(f"{path}: no end marker after the chunks (not a finished trace)")
    _chunks, records = struct.unpack_from("<QQ", b, at + 4)
    last_bytes, last_count = chunks[-1]
    program = records - (last_count - 1)  # the last chunk: the repeat, then End
    without = len(b) - last_bytes
    print(
        f"| {path} | {program:,} | {last_count - 1:,}, {last_bytes:,} B | {without / program:.2f} | "
        f"{len(b) / program:.2f} (+{last_bytes / program:.2f}, +{100 * last_bytes / without:.0f} %) |"
    )
