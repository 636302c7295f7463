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
callgrind_annotate --inclusive=yes --threshold=100 "$out/callgrind.idle" > "$out/callgrind.idle.txt"
for f in $fns; do
  ir=$(awk -v f="$f" 'index($0, ":" f "(") { gsub(",", "", $1); print $1; exit }' "$out/callgrind.idle.txt")
  echo "$f: ${ir:-?} instructions / $n calls = $(( ${ir:-0} / n )) per call"
done

# The enqueue paths: hipbench.hip (hipcc) under callgrind, inclusive instructions per call
# of each entry point. Call counts follow from hipbench's structure for ITER=320: batches
# of 32, 11 rounds, one warm-up call each; writes and launches also run in the gated
# batches, writes once more per round trip; the first launch loads the code object.
iters=320
TMPDIR="$PWD/$out" hipcc --offload-arch=gfx90a -O2 tools/hipbench/hipbench.hip -o "$out/hipbench"
entries="hipStreamWriteValue32 hipEventRecord __hipPushCallConfiguration __hipPopCallConfiguration hipLaunchKernel hipMallocAsync hipFreeAsync hipStreamAddCallback"
toggles=()
for f in $entries; do toggles+=(--toggle-collect="$f"); done
LD_LIBRARY_PATH="$PWD/$out/lib" KFDRT_DEVICE=emu:mi250x \
  valgrind --tool=callgrind --fair-sched=yes --callgrind-out-file="$out/callgrind.bench" "${toggles[@]}" \
  "$out/hipbench" "$iters" >/dev/null 2>"$out/callgrind.bench.log"
callgrind_annotate --inclusive=yes --threshold=100 "$out/callgrind.bench" > "$out/callgrind.bench.txt"
batch=$(( (iters / 32 + 1) * 32 ))
for f in $entries; do
  case $f in
    hipStreamWriteValue32) calls=$(( 1 + 2 * batch + iters )) ;;
    __hip*CallConfiguration | hipLaunchKernel) calls=$(( 1 + 2 * batch )) ;;
    hipStreamAddCallback) calls=$(( iters + 1 )) ;;
    # The plain and the _kept rows, each with one warm-up pair.
    hipMallocAsync | hipFreeAsync) calls=$(( 2 * (1 + batch) )) ;;
    *) calls=$(( 1 + batch )) ;;
  esac
  # The largest inclusive figure of the entry point (callgrind lists it once per source
  # file of its inlined code).
  ir=$(awk -v f="$f" '$0 ~ (":" f "( \\[|$)") { gsub(",", "", $1); if ($1 + 0 > m) m = $1 + 0 } END { print m }' "$out/callgrind.bench.txt")
  echo "$f: ${ir:-?} instructions / $calls calls = $(( ${ir:-0} / calls )) per call"
done
# hipLaunchKernel without its first call's kernel resolution and code object load
# (LaunchCache::promote, once): the warm launch.
total=$(awk '$0 ~ ":hipLaunchKernel( \\[|$)" { gsub(",", "", $1); if ($1 + 0 > m) m = $1 + 0 } END { print m + 0 }' "$out/callgrind.bench.txt")
first=$(awk '/LaunchCache::promote/ { gsub(",", "", $1); if ($1 + 0 > m) m = $1 + 0 } END { print m + 0 }' "$out/callgrind.bench.txt")
calls=$(( 2 * batch ))
echo "hipLaunchKernel warm: $(( total - first )) instructions / $calls calls = $(( (total - first) / calls )) per call"
# hipMallocAsync without the pool growths (PoolState::grow: after each synchronize of the
# plain row the pool gave its memory back and grows again; a device allocation, whose
# system calls callgrind does not see).
total=$(awk '$0 ~ ":hipMallocAsync( \\[|$)" { gsub(",", "", $1); if ($1 + 0 > m) m = $1 + 0 } END { print m + 0 }' "$out/callgrind.bench.txt")
grow=$(awk '/PoolState::grow/ { gsub(",", "", $1); if ($1 + 0 > m) m = $1 + 0 } END { print m + 0 }' "$out/callgrind.bench.txt")
calls=$(( 2 * (1 + batch) ))
echo "hipMallocAsync without pool growth: $(( total - grow )) instructions / $calls calls = $(( (total - grow) / calls )) per call (growth: $grow)"
