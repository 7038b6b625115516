#!/bin/bash
# `make run` on a fresh clone: how long until the hub serves, and how much it installed.
#
#   bench/fresh_clone.sh [REF] [PORT]
#
# Clones this repository at REF (default HEAD) into a new folder under /tmp, runs
# `make run PORT=PORT` there, and prints the seconds until http://127.0.0.1:PORT/
# answers and the sizes of .venv and js/node_modules. Stops the hub afterwards and
# leaves the clone (rm -rf it when done). pip's and npm's caches are used as they are.
set -u
ref=${1:-HEAD}
port=${2:-18800}
repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
dir=$(mktemp -d /tmp/mcp-hub-fresh-XXXXXX)
git clone -q "$repo" "$dir"
git -C "$dir" checkout -q "$ref"
cd "$dir" || exit 1
start=$(date +%s.%N)
setsid make run PORT="$port" > "$dir.log" 2>&1 &
pid=$!
served=""
for _ in $(seq 1 3600); do    # at most 30 minutes
  if curl -s -o /dev/null "http://127.0.0.1:$port/"; then served=$(date +%s.%N); break; fi
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.5
done
kill -TERM -- "-$pid" 2>/dev/null
wait "$pid" 2>/dev/null
if [ -z "$served" ]; then echo "the hub never served; see $dir.log" >&2; exit 1; fi
echo "ref $(git rev-parse --short HEAD): serving after $(echo "$served - $start" | bc) s"
du -sh .venv js/node_modules
echo "log: $dir.log; clone: $dir"
