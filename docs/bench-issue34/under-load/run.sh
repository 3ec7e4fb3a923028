#!/bin/bash
# Issue 34 §0: three consecutive full runs while a second process keeps one core busy
cd "$(dirname "$0")/../../.."   # the project root
mkdir -p bench-out/under-load
sh -c 'while :; do :; done' &
BUSY=$!
sleep 5
for i in 1 2 3; do
  echo "run $i start $(date -u +%T) load $(cat /proc/loadavg)"
  target/release/meshctl bench --clusters 10 --services 1000 --endpoints 10 --clients 1000 --connect-rate 25 \
    --stalled 1 --churn 5 --duration 30s --out bench-out/under-load/run$i > bench-out/under-load/run$i.txt 2>&1
  rc=$?
  echo "run $i end $(date -u +%T) rc $rc load $(cat /proc/loadavg)"
done
kill $BUSY
