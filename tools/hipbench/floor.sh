#!/usr/bin/env bash
# hipbench's idle query/synchronize rows against the floor of their loop (floor.c): an
# empty function and a last-error store in a shared library, called as hipbench calls
# hipStreamQuery. Alternates the two programs ROUNDS times (default 5).
#   tools/hipbench/floor.sh [ROUNDS]        (needs Debian's libamdhip64-dev and hipcc)
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-5}
cargo build --release -q -p kfdrt-hip
out=target/hipbench
mkdir -p "$out/lib"
ln -sf ../../release/libamdhip64.so "$out/lib/libamdhip64.so.5"
[ -x "$out/hipbench" ] || TMPDIR="$PWD/$out" hipcc --offload-arch=gfx90a -O2 tools/hipbench/hipbench.hip -o "$out/hipbench"
gcc -O2 -fPIC -shared tools/hipbench/floor.c -o "$out/libfloor.so"
g++ -O2 tools/hipbench/floor.cpp -o "$out/floor" -L"$out" -lfloor
for r in $(seq "$rounds"); do
  f=$(LD_LIBRARY_PATH="$PWD/$out" "$out/floor" | awk '{printf "%s %s  ", $2, $3}')
  k=$(LD_LIBRARY_PATH="$PWD/$out/lib" KFDRT_DEVICE=emu:mi250x "$out/hipbench" 2000 |
    awk '$2 ~ /^stream(Query|Synchronize)_idle$/ {printf "%s %s  ", $2, $3}')
  echo "$f$k"
done
