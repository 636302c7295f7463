#!/usr/bin/env bash
# The same HIP program (hipbench.hip) timed through kfdrt's libamdhip64.so.5 and through
# Debian's CLR (under `kfdrt emu-run`), on the same emulated MI250X, in one run; prints the
# median per operation and the ratio CLR/kfdrt.
#   tools/hipbench/run.sh [ITERATIONS]      (needs Debian's hipcc and libamdhip64-5)
set -euo pipefail
cd "$(dirname "$0")/../.."
iters=${1:-500}
device=emu:mi250x
cargo build --release -q -p kfdrt-hip -p kfdrt-cli -p kfdrt-preload
out=target/hipbench
mkdir -p "$out/lib"
ln -sf ../../release/libamdhip64.so "$out/lib/libamdhip64.so.5"
# hipcc leaves an empty <stem>-XXXXXX directory in TMPDIR: keep it in target/.
TMPDIR="$PWD/$out" hipcc --offload-arch=gfx90a -O2 tools/hipbench/hipbench.hip -o "$out/hipbench"

LD_LIBRARY_PATH="$PWD/$out/lib" KFDRT_DEVICE=$device "$out/hipbench" "$iters" > "$out/kfdrt.txt"
# Bounded: a stall in CLR's run still leaves the operations it finished.
timeout 900 target/release/kfdrt emu-run --device $device -- "$out/hipbench" "$iters" > "$out/clr.txt" ||
  echo "note: CLR's run did not finish (status $?); its completed operations are compared" >&2
grep -q "^library .*$out/lib/libamdhip64.so.5" "$out/kfdrt.txt" || { echo "kfdrt run did not load kfdrt's library" >&2; exit 1; }
grep -q "^library /.*/libamdhip64.so.5" "$out/clr.txt" && ! grep -q "$out/lib" "$out/clr.txt" || { echo "CLR run did not load Debian's library" >&2; exit 1; }

# The floor of the idle query/synchronize rows: an empty function in a shared library,
# called through the PLT in the same loop shape (floor.c, floor.cpp).
gcc -O2 -fPIC -shared tools/hipbench/floor.c -o "$out/libfloor.so"
g++ -O2 tools/hipbench/floor.cpp -o "$out/floor" -L"$out" -lfloor
LD_LIBRARY_PATH="$PWD/$out" "$out/floor" > "$out/floor.txt"

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
echo "machine: $(uname -n), $cpu, $(nproc) CPUs; device $device (kfd-emu); $iters iterations, medians"
echo "kfdrt: $(grep '^library' "$out/kfdrt.txt" | cut -d' ' -f2)   CLR: $(grep '^library' "$out/clr.txt" | cut -d' ' -f2)"
printf '%-28s %12s %12s %10s\n' operation "kfdrt ns" "CLR ns" "CLR/kfdrt"
join <(grep '^op ' "$out/kfdrt.txt" | awk '{print $2, $3}' | sort) \
     <(grep '^op ' "$out/clr.txt" | awk '{print $2, $3}' | sort) |
  awk '{ r = ($2 > 0) ? $3 / $2 : 0; printf "%-28s %12.1f %12.1f %9.1fx\n", $1, $2, $3, r }'
floor=$(awk '$2 == "floor_empty" {print $3}' "$out/floor.txt")
clrq=$(awk '$2 == "streamQuery_idle" {print $3}' "$out/clr.txt")
clrs=$(awk '$2 == "streamSynchronize_idle" {print $3}' "$out/clr.txt")
# (A CLR run that stopped early leaves its idle rows out: the floor alone then.)
if [ -n "$clrq" ] && [ -n "$clrs" ]; then
  awk -v f="$floor" -v q="$clrq" -v s="$clrs" 'BEGIN { printf "%-28s %12.1f %12s %10s   (an empty function called the same way; CLR idle query %.1fx it, synchronize %.1fx)\n", "call_floor", f, "-", "-", q / f, s / f }'
else
  printf '%-28s %12.1f %12s %10s   (an empty function called the same way)\n' call_floor "$floor" - -
fi
