#!/usr/bin/env bash
# Repeated code over the tree, with the `duplicates` command of the tool library (called,
# never vendored: where it is not installed this check says so and passes).
#   tools/dup-check.sh           the 40 largest repeats, then the gate below
#   tools/dup-check.sh --list    the gate's findings only
# Gate: fails when an identical run (not merely alike in shape) of 10 or more lines stands
# in two places, unless the pair of files is one of the known repeats listed here. A known
# pair leaves this list when its owner factors it; a new repeat is factored, not listed.
# Offline; a few seconds on the whole tree (git-tracked files, so target/ is never read).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v duplicates >/dev/null 2>&1; then
  echo "dup-check: the duplicates command is not installed here: skipped"
  exit 0
fi

known=(
  # Generated code-object bytes of the wait kernel (data written as Rust arrays).
  "src/waitkernel/code.rs ~ src/waitkernel/code.rs"
  # Test, bench and fuzz scaffolding outside the runtime.
  "fuzz/src/gen.rs ~ fuzz/src/gen.rs"
  "fuzz/src/gen.rs ~ pm4/src/pkt3.rs"
  "emu/benches/engines.rs ~ emu/benches/engines.rs"
  # Runtime and emulator repeats whose files other work owns at the time of writing.
  "emu/src/shader/lower.rs ~ isa/src/display.rs"
  "isa/src/lib.rs ~ isa/src/lib.rs"
)

if [ "${1:-}" != "--list" ]; then
  duplicates --most 40 --seconds 60
  echo
fi

report=$(duplicates --min-lines 10 --most 200 --seconds 60)
new=()
while IFS= read -r row; do
  pair=$(sed -E 's/^D[0-9]+ ([^:]+):[0-9-]+ ~ ([^:]+):[0-9-]+.*/\1 ~ \2/' <<<"$row")
  listed=false
  for k in "${known[@]}"; do
    [ "$pair" = "$k" ] && listed=true
  done
  $listed || new+=("$row")
done < <(grep -E '^D[0-9]+ ' <<<"$report" | grep -v ' shape' || true)
grep -E '^incomplete:' <<<"$report" || true

if [ ${#new[@]} -gt 0 ]; then
  echo "dup-check: identical runs of 10+ lines repeated (factor them into one place):" >&2
  printf '  %s\n' "${new[@]}" >&2
  exit 1
fi
echo "dup-check: no unlisted identical run of 10+ lines"
