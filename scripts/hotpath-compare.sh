#!/usr/bin/env bash
# Compares the 8 B one-way latency of two commits on the typed path (a u64 loan written
# and sent, a busy receive), their binaries alternated A B A B in one run, as a change
# on the hot path is compared with the previous landing's:
#   scripts/hotpath-compare.sh A B [PAIRS] [ROUND_TRIPS]      (default 10 pairs, 150000)
# Each commit is checked out in a temporary worktree and benches/hotpath/compare/
# typed_pingpong.rs (from this checkout) built there as an example of iox_service, in
# release. Prints every pair, then a summary over the pairs whose two halves ran with the
# same placement of the two processes' cores (a ratio within 0.75-1.33: on a VM the
# one-way latency moves several-fold with where the vCPUs land). Needs taskset.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: $0 A B [PAIRS] [ROUND_TRIPS]" >&2; exit 2; }
pairs=${3:-10}
trips=${4:-150000}
work=$(mktemp -d)
trap 'git worktree remove --force "$work/tree" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
source=$PWD/benches/hotpath/compare/typed_pingpong.rs
git worktree add -q --detach "$work/tree" "$1"
for rev in "$1" "$2"; do
    git -C "$work/tree" checkout -q --detach "$rev"
    mkdir -p "$work/tree/iox_service/examples"
    cp "$source" "$work/tree/iox_service/examples/typed_pingpong.rs"
    (cd "$work/tree" && CARGO_TARGET_DIR="$work/target" cargo build -q --release -p iox_service --example typed_pingpong)
    cp "$work/target/release/examples/typed_pingpong" "$work/$(git rev-parse --short "$rev")"
    rm "$work/tree/iox_service/examples/typed_pingpong.rs"
done
a=$(git rev-parse --short "$1")
b=$(git rev-parse --short "$2")
echo "one-way median / p99 ns, $trips round trips each, alternated"
for _ in $(seq "$pairs"); do
    line=""
    for rev in "$a" "$b"; do
        root=$(mktemp -d)
        line="$line $(taskset -c 0 "$work/$rev" lead "$root" "$trips")"
        rm -rf "$root"
    done
    echo "$a $b:$line"
done | tee "$work/pairs"
awk -v a="$a" -v b="$b" '{ r = $5 / $3; if (r > 0.75 && r < 1.33) { n++; s += r; if ($5 < $3) f++; else if ($5 > $3) l++ } }
    END { printf "%d of %d pairs with the same placement: %s faster in %d, slower in %d, mean %s/%s %.3f\n",
          n, NR, b, f, l, b, a, (n ? s / n : 0) }' "$work/pairs"
