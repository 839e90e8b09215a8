#!/usr/bin/env bash
# Reserves at least N 2 MiB huge pages (default 512, 1 GiB) for the huge-page tests and
# benchmark, and lets shared memory use transparent huge pages where a mapping asks
# (shmem_enabled "advise", only if it was "never"). Root only; never lowers a reserve.
# Exits 1, saying why, if the kernel could not reserve them (memory too fragmented or
# too small), so the caller leaves the tests to say they skipped.
set -euo pipefail
want=${1:-512}
dir=/sys/kernel/mm/hugepages/hugepages-2048kB
if [ ! -d "$dir" ]; then
    echo "reserve-hugepages: this kernel has no 2 MiB huge pages ($dir)" >&2
    exit 1
fi
if [ "$(id -u)" != 0 ]; then
    echo "reserve-hugepages: needs root to write $dir/nr_hugepages" >&2
    exit 1
fi
now=$(cat "$dir/nr_hugepages")
if [ "$now" -lt "$want" ]; then
    echo "$want" > "$dir/nr_hugepages"
fi
thp=/sys/kernel/mm/transparent_hugepage/shmem_enabled
if [ -w "$thp" ] && grep -q '\[never\]' "$thp"; then
    echo advise > "$thp" || true
fi
got=$(cat "$dir/free_hugepages")
echo "reserve-hugepages: $(cat "$dir/nr_hugepages") reserved, $got free (wanted $want); shmem_enabled: $(cat "$thp" 2>/dev/null || echo n/a)"
if [ "$got" -lt "$want" ]; then
    echo "reserve-hugepages: only $got of $want could be reserved" >&2
    exit 1
fi
