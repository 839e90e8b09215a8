#!/usr/bin/env bash
# Two hosts on one machine: the Zenoh bridge in two network namespaces joined by a veth
# pair (10.199.0.1 <-> 10.199.0.2, real addresses as two hosts have), each with its own
# IOX_ROOT. Host A exports camera/*, host B imports it; a probe publisher on A sends
# numbered 64 KiB samples and a probe receiver on B checks 20 of them arrive intact and
# in order.
#
#   scripts/zenoh_netns.sh <iox-zenoh binary> <probe binary>
#
# Needs root (ip netns). Exits 77 (skipped) without root or without `ip`.
set -euo pipefail
bridge=${1:?usage: $0 <iox-zenoh binary> <probe binary>}
probe=${2:?usage: $0 <iox-zenoh binary> <probe binary>}
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root to create network namespaces"; exit 77; }
command -v ip >/dev/null || { echo "SKIP: the ip tool (iproute2) is not installed"; exit 77; }

tag=$$
a=ioxz-a-$tag b=ioxz-b-$tag
va=ioxa$tag vb=ioxb$tag
dir=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    ip netns del "$a" 2>/dev/null || true
    ip netns del "$b" 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT
ip netns add "$a" || { echo "SKIP: cannot create network namespaces here"; exit 77; }
ip netns add "$b"
ip link add "$va" type veth peer name "$vb"
ip link set "$va" netns "$a"
ip link set "$vb" netns "$b"
ip -n "$a" addr add 10.199.0.1/24 dev "$va"
ip -n "$b" addr add 10.199.0.2/24 dev "$vb"
for ns in "$a" "$b"; do ip -n "$ns" link set lo up; done
ip -n "$a" link set "$va" up
ip -n "$b" link set "$vb" up
mkdir -p "$dir/a" "$dir/b"

ip netns exec "$a" env IOX_ROOT="$dir/a" "$bridge" --export 'camera/*' --listen tcp/10.199.0.1:7447 --status-interval 5 &
pids+=($!)
ip netns exec "$b" env IOX_ROOT="$dir/b" "$bridge" --import 'camera/*' --connect tcp/10.199.0.1:7447 --status-interval 5 &
pids+=($!)
ip netns exec "$b" env IOX_ROOT="$dir/b" "$probe" receive camera/front 20 65536 30 &
receiver=$!
ip netns exec "$a" env IOX_ROOT="$dir/a" "$probe" publish camera/front 30 65536 &
pids+=($!)
status=0
wait "$receiver" || status=$?
[ "$status" = 0 ] && echo "zenoh_netns: host B received host A's samples over the veth pair"
exit "$status"
