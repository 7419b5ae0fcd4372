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
