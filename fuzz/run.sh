#!/usr/bin/env bash
# Builds one libFuzzer target on the stable toolchain and runs it for SECONDS.
#   fuzz/run.sh TARGET SECONDS [extra libFuzzer flags...]
#   fuzz/run.sh --build            (build every target only)
#   fuzz/run.sh --test [ARGS]      (cargo test of the harnesses and seeds, uninstrumented)
#   fuzz/run.sh --lint             (rustfmt --check and clippy -D warnings on the fuzz crate)
# Targets: pm4_decode engine_pm4 engine_sdma engine_aql kfd_ioctl codeobj_parse.
# codeobj_parse starts from real code objects: the test kernels built here with clang-19 /
# ld.lld-19 (when installed) into corpus/codeobj_parse (never committed: the sources in
# test-kernels/ are the only copy).
#
# No nightly, no cargo-fuzz: stable rustc instruments with the SanitizerCoverage pass
# (-Cpasses=sancov-module and its LLVM options, what cargo-fuzz passes with `-s none`),
# libfuzzer-sys compiles libFuzzer itself (needs a C++ compiler). No sanitizer: the
# engines' own checks, Rust's bounds/overflow checks (debug assertions are on) and the
# harness's livelock budget are the oracles.
#
# New inputs go to fuzz/corpus/TARGET (ignored by git); the committed seeds in
# fuzz/seeds/TARGET are read, never written. Crashes go to fuzz/artifacts/TARGET (ignored);
# the script exits non-zero when libFuzzer found a crash, a timeout or a leak.
set -euo pipefail
cd "$(dirname "$0")"

triple=$(rustc -vV | sed -n 's/^host: //p')
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
export RUSTFLAGS="${RUSTFLAGS:-} -Cpasses=sancov-module \
 -Cllvm-args=-sanitizer-coverage-level=4 \
 -Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
 -Cllvm-args=-sanitizer-coverage-pc-table \
 -Cllvm-args=-sanitizer-coverage-trace-compares \
 --cfg fuzzing -Cdebug-assertions -Coverflow-checks -Copt-level=3"

# fuzz/ is its own workspace; its lock file is derived from the main one (same versions
# for shared crates) and not committed, so it can never go stale.
if [ ! -f Cargo.lock ] || [ ../Cargo.lock -nt Cargo.lock ]; then
  cp ../Cargo.lock Cargo.lock
fi

build() {
  # --target keeps RUSTFLAGS off build scripts and proc macros.
  cargo build -q --release --target "$triple" --bins
}

if [ "${1:-}" = "--lint" ]; then
  cargo fmt --check
  env -u RUSTFLAGS cargo clippy -q --all-targets -- -D warnings
  exit 0
fi
if [ "${1:-}" = "--test" ]; then
  shift
  env -u RUSTFLAGS cargo test -q "$@"
  exit 0
fi
if [ "${1:-}" = "--build" ]; then
  build
  exit 0
fi

target=${1:?usage: fuzz/run.sh TARGET SECONDS [libFuzzer flags]}
secs=${2:?usage: fuzz/run.sh TARGET SECONDS [libFuzzer flags]}
shift 2
build
# Seeds for the code-object parser: a few test kernels for both targets, code object v4,
# v5 (default) and v6, OpenCL (relocations, globals) and HIP (linked by clang itself).
codeobj_seeds() {
  local out=$1 tmp src t v
  command -v clang-19 >/dev/null && command -v ld.lld-19 >/dev/null || {
    echo "run.sh: clang-19/ld.lld-19 missing: codeobj_parse starts without code-object seeds" >&2
    return 0
  }
  tmp=$(mktemp -d)
  for src in vadd globals reduce; do
    for t in gfx90a gfx942; do
      for v in 4 5 6; do
        clang-19 -x cl -cl-std=CL2.0 -target amdgcn-amd-amdhsa -mcpu=$t -nogpulib -O2 \
          -mcode-object-version=$v -c "../test-kernels/cl/$src.cl" -o "$tmp/k.o" 2>/dev/null &&
          ld.lld-19 -shared "$tmp/k.o" -o "$out/seed-$src-$t-v$v.co" || true
      done
    done
  done
  for t in gfx90a gfx942; do
    clang-19 -x hip --offload-device-only --no-gpu-bundle-output -nogpulib -nogpuinc -O2 \
      --offload-arch=$t -c ../test-kernels/hip/dims.hip -o "$out/seed-dims-$t.co" || true
  done
  rm -rf "$tmp"
}

# The decoder is cheap: let inputs reach the full length at once. Engine inputs grow
# gradually (libFuzzer's default), longer ones cost more per run.
len_flags=(-max_len=4096)
[ "$target" = pm4_decode ] && len_flags=(-max_len=8192 -len_control=0)
if [ "$target" = codeobj_parse ]; then
  # Code objects are a few KiB to tens of KiB: room for the whole seed.
  len_flags=(-max_len=65536)
  mkdir -p corpus/codeobj_parse
  codeobj_seeds corpus/codeobj_parse
fi
mkdir -p "corpus/$target" "artifacts/$target" "seeds/$target"
exec "$CARGO_TARGET_DIR/$triple/release/$target" \
  -max_total_time="$secs" -timeout=30 -rss_limit_mb=4096 "${len_flags[@]}" \
  -print_final_stats=1 -artifact_prefix="artifacts/$target/" \
  "$@" "corpus/$target" "seeds/$target"
