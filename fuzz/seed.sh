#!/bin/sh
# Seeds the fuzz corpora from the checked-in fixture (the corpora themselves are not committed).
set -eu
cd "$(dirname "$0")"
fixture=../crates/offtrace-format/tests/fixtures/v1.offtrace
mkdir -p corpus/read_trace corpus/decode_chunk
cp "$fixture" corpus/read_trace/v1-fixture
head -c 64 "$fixture" > corpus/read_trace/header-only
head -c 700 "$fixture" > corpus/read_trace/truncated-700
# decode_chunk: first byte = record count, then raw record bytes (an End record, a notification).
printf '\001\012\000\000' > corpus/decode_chunk/end-record
printf '\001\202\000\001\000\001\000\000\005\001\002\001\002' > corpus/decode_chunk/fwa-notification
cp ../crates/offtrace-format/tests/fixtures/v2.offtrace corpus/read_trace/v2-fixture
cp ../crates/offtrace-format/tests/fixtures/v3.offtrace corpus/read_trace/v3-fixture
# Format 6: activities that repeat their kernel, allocations and device end as flags.
cp ../crates/offtrace-format/tests/fixtures/v6.offtrace corpus/read_trace/v6-fixture
# A KernelDispatch record (tag 0x0b) with one device allocation at argument 0.
printf '\001\013\007\144\003\004\001\011\010\001\100\001\001\020\001\001\001\100\040\000\002' > corpus/decode_chunk/kernel-dispatch
