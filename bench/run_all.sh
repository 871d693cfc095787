#!/usr/bin/env bash
# Run every benchmark; each prints its figures and its ratio against a
# baseline measured in the same run (nothing asserts on time). Output is kept
# in bench/out/ (ignored by git). Exit status: non-zero only if a benchmark
# failed to run or one of its correctness checks failed.
#
#   bash bench/run_all.sh            (or: make bench)
#
# Needs PostgreSQL on 127.0.0.1:5432 (user postgres, trust) and Redis on
# 127.0.0.1:6379; installs wrk with apt-get when it is missing.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
mkdir -p bench/out

status=0
# create_event first: passages_depth writes and then drops about 1 GB, and the
# disk's writeback after it would slow the commits that create_event measures.
for bench in web_tier platform_targets protection observability create_event passages_depth delivery delivery_load scheduled_messages indexing passages_page chat_stream chat_messages retention sdk_bots webchat; do
  echo "==================== $bench"
  "$PYTHON" "bench/$bench.py" 2> >(tee "bench/out/$bench.log" >&2) | tee "bench/out/$bench.txt"
  rc=${PIPESTATUS[0]}
  if [ "$rc" -ne 0 ]; then
    echo "$bench exited with $rc" >&2
    status=1
  fi
done
exit "$status"
