#!/bin/bash
cd "$(dirname "$0")"  # a folder holding release builds of meshctl and meshd
for i in 1 2 3 4 5; do
  echo "round $i $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)"
  ./meshctl bench --meshd-bin ./meshd --clusters 3 --services 100 --endpoints 10 --clients 1000 --connect-rate 25 --churn 5 --duration 20s --out ./bench-$i > /dev/null 2>bench-$i.err
  python3 -c "import json;r=json.load(open('./bench-$i/report.json'));print('meshd', r['cost']['targetMsPerChangePer1kStreams'], r['convergence']['converged'], r['machine']['loadAtStart'])"
  echo "floor $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)"
  ./meshctl bench-floor --streams 1000 --bytes 4812 --changes 100 --between 200ms --stack > floor-$i.json
  python3 -c "import json;r=json.load(open('./floor-$i.json'));print('sockets', r['msPerChangePer1kStreams'], [(s['server'], round(s['msPerChangePer1kStreams'],2)) for s in r['stack']])"
done
echo done $(date +%T)
