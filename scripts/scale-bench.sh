#!/usr/bin/env bash
# Scale measurement of `offtrace report` and each export (docs/overhead.md, "Reading at scale").
#
#   scripts/scale-bench.sh LABEL OFFTRACE_BINARY TRACE [what...]
#
# what: report json perfetto chrome sqlite csv (default: all). Prints one tab-separated line per
# command: label, what, records, wall s, user s, sys s, peak RSS MB, records/s (wall).
# Outputs go to a temporary folder that is removed afterwards. Needs GNU time (/usr/bin/time).
set -euo pipefail
label=$1 bin=$2 trace=$3
shift 3
whats=("$@")
[ ${#whats[@]} -eq 0 ] && whats=(report json perfetto chrome sqlite csv)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# Records in the trace: the sum of the chunk headers' counts (no decoding).
records=$(python3 - "$trace" <<'PY'
import struct, sys
f = open(sys.argv[1], 'rb'); f.seek(64); n = 0
while True:
    h = f.read(24)
    if len(h) < 24 or h[:4] != b'OTCK':
        break
    stored, raw, count = struct.unpack('<III', h[8:20]); n += count; f.seek(stored, 1)
print(n)
PY
)
for what in "${whats[@]}"; do
  case $what in
    report) cmd=("$bin" report "$trace") ;;
    json) cmd=("$bin" report --format json "$trace") ;;
    perfetto) cmd=("$bin" export --format perfetto -o "$out/t.pftrace" "$trace") ;;
    chrome) cmd=("$bin" export --format chrome -o "$out/t.json" "$trace") ;;
    sqlite) cmd=("$bin" export --format sqlite -o "$out/t.sqlite" "$trace") ;;
    csv) cmd=("$bin" export --format csv -o "$out/csv" "$trace") ;;
    *) echo "unknown: $what" >&2; exit 2 ;;
  esac
  /usr/bin/time -o "$out/time" -f "%e %U %S %M" "${cmd[@]}" > /dev/null 2> "$out/stderr" || {
    echo "$label $what failed:" >&2; cat "$out/stderr" >&2; }
  read -r wall user sys rss < "$out/time"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%d\t%.0f\n' "$label" "$what" "$records" "$wall" "$user" "$sys" \
    $((rss / 1024)) "$(python3 -c "print($records / max($wall, 0.001))")"
  rm -rf "$out/t."* "$out/csv"
done
