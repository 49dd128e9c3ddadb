#!/usr/bin/env bash
# The system calls a server makes from spawn to ready, by kind: counts, not times, so two builds
# compare exactly on a shared machine.
#
#   bench/start_syscalls.sh BINARY CONFIG [PORT]
#
# BINARY is started as `BINARY serve --config CONFIG --rescan-interval 0` on 127.0.0.1:PORT
# (default 38211) under `perf stat` with the kernel's syscall tracepoints, stopped with SIGINT
# once /readyz answers, and the count of each kind is printed (the stop itself adds a few).
# The file system's calls repeat exactly from one start to the next; futex and mprotect move with
# the scheduling.
# Needs perf and curl, and tracepoints readable (root, or kernel.perf_event_paranoid <= 1).
set -euo pipefail

if [[ $# -lt 2 ]]; then
    echo "usage: $0 BINARY CONFIG [PORT]" >&2
    exit 2
fi
binary=$1
config=$2
port=${3:-38211}
calls=(getdents64 openat close newfstatat newfstat read lseek inotify_add_watch futex mprotect)
events=$(printf 'syscalls:sys_enter_%s,' "${calls[@]}")
out=$(mktemp)
trap 'rm -f "$out"' EXIT

RUST_LOG=warn perf stat -x, -e "${events%,}" -o "$out" \
    "$binary" serve --config "$config" --listen "127.0.0.1:$port" --rescan-interval 0 >/dev/null 2>&1 &
perf_pid=$!
ready=
for _ in $(seq 6000); do
    if curl -sf -o /dev/null "http://127.0.0.1:$port/readyz"; then
        ready=1
        break
    fi
    if ! kill -0 "$perf_pid" 2>/dev/null; then
        echo "the server exited before it was ready" >&2
        exit 1
    fi
    sleep 0.02
done
server=$(pgrep -P "$perf_pid" || true)
if [[ -z $ready ]]; then
    echo "the server was not ready within 120 s" >&2
    [[ -n $server ]] && kill -INT "$server"
    wait "$perf_pid" || true
    exit 1
fi
if [[ -z $server ]]; then
    echo "no server under perf" >&2
    exit 1
fi
kill -INT "$server"
wait "$perf_pid" || true
# perf -x, lines: count,unit,event,...
awk -F, '/syscalls:sys_enter_/ { sub("syscalls:sys_enter_", "", $3); printf "%-18s %10s\n", $3, $1 }' "$out"
