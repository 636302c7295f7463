#!/usr/bin/env bash
# Instructions per idle hipStreamQuery / hipStreamSynchronize call (created stream and
# null stream) in kfdrt's libamdhip64.so.5, counted by callgrind over N calls each.
#   tools/hipbench/callgrind.sh [N]        (needs valgrind and Debian's libamdhip64-dev)
set -euo pipefail
cd "$(dirname "$0")/../.."
n=${1:-2000}
cargo build --release -q -p kfdrt-hip
out=target/hipbench
mkdir -p "$out/lib"
ln -sf ../../release/libamdhip64.so "$out/lib/libamdhip64.so.5"
g++ -O2 -g -D__HIP_PLATFORM_AMD__ tools/hipbench/idle.cpp -o "$out/idle" -lamdhip64
fns="query_created sync_created query_null sync_null"
toggles=()
for f in $fns; do toggles+=(--toggle-collect="$f*"); done
LD_LIBRARY_PATH="$PWD/$out/lib" KFDRT_DEVICE=emu:mi250x \
  valgrind --tool=callgrind --callgrind-out-file="$out/callgrind.idle" "${toggles[@]}" \
  "$out/idle" "$n" >/dev/null 2>"$out/callgrind.idle.log"
callgrind_annotate --inclusive=yes "$out/callgrind.idle" > "$out/callgrind.idle.txt"
for f in $fns; do
  ir=$(awk -v f="$f" 'index($0, ":" f "(") { gsub(",", "", $1); print $1; exit }' "$out/callgrind.idle.txt")
  echo "$f: ${ir:-?} instructions / $n calls = $(( ${ir:-0} / n )) per call"
done
