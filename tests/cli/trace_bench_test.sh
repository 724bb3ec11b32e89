#!/usr/bin/env bash
# End-to-end test of `tessera trace-bench` on a small synthetic trace: the table, the JSON shape
# (every bucket 0..130), and errors. Usage: trace_bench_test.sh path/to/tessera
set -u
TESSERA=${1:?usage: trace_bench_test.sh path/to/tessera}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
{
  echo "sn,cpu_milli,memory_mib,gpu,model"
  for i in $(seq 0 19); do echo "openb-node-$i,96000,786432,8,G2"; done
  for i in $(seq 20 29); do echo "openb-node-$i,64000,262144,2,T4"; done
} >"$WORK/nodes.csv"
{
  echo "name,cpu_milli,memory_mib,num_gpu,gpu_milli"
  for i in $(seq 100 399); do
    case $((i % 6)) in
      0) echo "openb-pod-$i,8000,16384,0,0" ;;
      1) echo "openb-pod-$i,12000,32768,1,1000" ;;
      2) echo "openb-pod-$i,4000,8192,1,$((200 + (i % 7) * 100))" ;;
      3) echo "openb-pod-$i,32000,65536,4,1000" ;;
      *) echo "openb-pod-$i,6000,12288,1,$((300 + (i % 5) * 110))" ;;
    esac
  done
} >"$WORK/pods.csv"
"$TESSERA" trace-bench --nodes "$WORK/nodes.csv" --pods "$WORK/pods.csv" --policy random,bestfit,fgd \
  --seeds 42-44 --inflate 1.3 --json "$WORK/out.json" >"$WORK/table.txt" 2>"$WORK/err.txt"
check "exits 0" test $? -eq 0
check "table has each policy" bash -c "grep -q '^random' '$WORK/table.txt' && grep -q '^bestfit' '$WORK/table.txt' && grep -q '^fgd' '$WORK/table.txt'"
check "json shape" python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
assert d['total_gpus'] == 180 and d['inflate'] == 1.3
assert len(d['runs']) == 9
for r in d['runs']:
    assert sorted(int(k) for k in r['alloc_pct']) == list(range(131))
    assert sorted(int(k) for k in r['frag_pct']) == list(range(131))
    assert r['policy'] in ('random', 'bestfit', 'fgd') and r['seed'] in (42, 43, 44)
    assert 0 < r['alloc_pct']['130'] <= 100 and r['failed_pods'] > 0
" "$WORK/out.json"
"$TESSERA" trace-bench --nodes "$WORK/nodes.csv" --pods "$WORK/pods.csv" --policy random,bestfit,fgd \
  --seeds 42-44 --inflate 1.3 --bound >"$WORK/bound.txt" 2>&1
check "bound exits 0" test $? -eq 0
# The bound row: at least every policy at every point, at most 100, fewest unallocated GPUs.
check "bound is above every policy" python3 -c "
import sys
rows = {l.split()[0]: l.split()[1:] for l in open(sys.argv[1]) if l.split() and l.split()[0] in ('random', 'bestfit', 'fgd', 'bound')}
b = [float(x) for x in rows['bound'][:8]]
assert all(v <= 100 for v in b), b
for p in ('random', 'bestfit', 'fgd'):
    assert all(float(x) <= y + 0.005 for x, y in zip(rows[p][:8], b)), (p, rows[p], b)
    assert float(rows[p][8]) >= float(rows['bound'][8]), (p, rows)
" "$WORK/bound.txt"
"$TESSERA" trace-bench --nodes "$WORK/nodes.csv" --pods "$WORK/pods.csv" --policy bestfit,fgd \
  --seeds 42-44 --explain >"$WORK/explain.txt" 2>&1
check "explain exits 0" test $? -eq 0
# The two accounts of the gap agree: failed requests ~ unallocated (arrivals just past 100%), and
# the free share's rows add up to the unallocated GPUs.
check "explain adds up" python3 -c "
import sys
rows = {}
lines = open(sys.argv[1]).read().split('Where the unallocated GPUs are')[1].splitlines()[1:]
assert lines[0].split() == ['bestfit', 'fgd'], lines[0]
for l in lines[1:]:
    if l.strip():
        label, a, b = l[:44].strip(), float(l[44:].split()[0]), float(l[44:].split()[1])
        rows[label] = (a, b)
for i in (0, 1):
    u = rows['unallocated (capacity - allocated)'][i]
    assert 100 <= rows['arrived, % of capacity'][i] < 103, rows
    failed = next(v for k, v in rows.items() if k.startswith('failed pods'))
    assert abs(failed[i] - u) < 6, rows
    free = [v[i] for k, v in rows.items() if k.startswith(('on nodes', 'whole GPUs', 'partly used'))]
    assert abs(sum(free) - u) < 0.5 and abs(rows['free share'][i] - u) < 0.1, rows
" "$WORK/explain.txt"
"$TESSERA" trace-bench --nodes "$WORK/nodes.csv" --pods "$WORK/pods.csv" --policy bestfit,fgd,random \
  --seeds 42-46 --baseline fgd --json "$WORK/paired.json" >"$WORK/paired.txt" 2>&1
check "baseline exits 0" test $? -eq 0
# The paired rows agree with the per-seed JSON (rounded there to 0.01).
check "baseline rows match the runs" python3 -c "
import json, re, statistics, sys
d = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read().split('Paired by seed against fgd')[1]
rows = {l.split()[0]: l for l in text.splitlines()[2:] if l.strip()}
assert sorted(rows) == ['bestfit', 'random'], rows
alloc = {(r['policy'], r['seed']): r['alloc_pct'] for r in d['runs']}
for p, line in rows.items():
    cells = re.findall(r'([-+][0-9.]+) \+/- ([0-9.]+) \(([0-9]+) / ([0-9]+)\)', line)
    assert len(cells) == 2, line
    for (mean, se, ahead, behind), b in zip(cells, ('100', '130')):
        diffs = [alloc[(p, s)][b] - alloc[('fgd', s)][b] for s in range(42, 47)]
        assert abs(float(mean) - statistics.mean(diffs)) < 0.011, (p, b, mean, diffs)
        assert abs(float(se) - statistics.stdev(diffs) / 5 ** 0.5) < 0.011, (p, b, se, diffs)
        assert int(ahead) + int(behind) <= 5
" "$WORK/paired.json" "$WORK/paired.txt"
"$TESSERA" trace-bench --nodes "$WORK/nodes.csv" --pods "$WORK/pods.csv" --policy bestfit \
  --baseline fgd 2>"$WORK/e5"
check "baseline outside the policies refused" grep -q -- '--baseline: "fgd" is not in --policy bestfit' "$WORK/e5"
"$TESSERA" trace-bench --nodes "$WORK/nodes.csv" --pods "$WORK/pods.csv" --policy magic 2>"$WORK/e1"
check "unknown policy refused" test $? -eq 1
check "unknown policy lists known" grep -q 'expected one of: random, dotprod, clustering, packing, bestfit, fgd, tessera' "$WORK/e1"
"$TESSERA" trace-bench --nodes "$WORK/nodes.csv" --pods "$WORK/pods.csv" --seeds 9-x 2>"$WORK/e2"
check "bad seeds refused" grep -q -- '--seeds: "9-x"' "$WORK/e2"
"$TESSERA" trace-bench --nodes "$WORK/nodes.csv" --pods "$WORK/pods.csv" --policy fgd --seeds 42 \
  --ties random >/dev/null 2>&1
check "random ties run" test $? -eq 0
"$TESSERA" trace-bench --nodes "$WORK/nodes.csv" --pods "$WORK/pods.csv" --ties maybe 2>"$WORK/e4"
check "bad ties refused" grep -q -- '--ties: expected first or random' "$WORK/e4"
# An output path that cannot be written is refused before any run: no table printed.
"$TESSERA" trace-bench --nodes "$WORK/nodes.csv" --pods "$WORK/pods.csv" --policy fgd --seeds 42 \
  --json "$WORK/no-such-dir/out.json" >"$WORK/o6" 2>"$WORK/e6"
check "unwritable --json refused" test $? -eq 1
check "unwritable --json named" grep -q -- "--json: $WORK/no-such-dir/out.json: no such directory" "$WORK/e6"
check "unwritable --json refused before the runs" test ! -s "$WORK/o6"
# GPU-model constraints: "nan" is none (the dataset's README). Pods no node holds even empty (a
# model the node list lacks, more GPUs or CPU than any node has) are named on stderr by request
# shape, commonest first, beside what the node list offers; the run goes on.
{
  echo "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec"
  echo "openb-pod-a,4000,8192,1,500,nan"
  echo "openb-pod-b,4000,8192,1,500,T4|V100M32"
  echo "openb-pod-c,4000,8192,1,500,H100"
  echo "openb-pod-d,4000,8192,1,500,H100"
  echo "openb-pod-e,4000,8192,1,500,A100|H100"
  echo "openb-pod-f,4000,8192,16,1000,"
  echo "openb-pod-g,200000,8192,0,0,"
} >"$WORK/spec.csv"
"$TESSERA" trace-bench --nodes "$WORK/nodes.csv" --pods "$WORK/spec.csv" --policy fgd --seeds 42 \
  --json "$WORK/spec.json" >"$WORK/o7" 2>"$WORK/e7"
check "pods no node holds: still exit 0" test $? -eq 0
check "  named by shape, commonest first, beside the node list's most and models" grep -qx "tessera trace-bench: warning: $WORK/spec.csv: pods that no node of $WORK/nodes.csv holds even empty, so they are never placed: 4000m CPU, 8192 MiB, 500 milli-GPU of H100 x2; 4000m CPU, 8192 MiB, 500 milli-GPU of A100|H100 x1; 4000m CPU, 8192 MiB, 16 GPUs x1; 200000m CPU, 8192 MiB, no GPU x1 (the most on one node: 96000m CPU, 786432 MiB, 8 GPUs; GPU models G2, T4)" "$WORK/e7"
printf 'name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\nopenb-pod-a,4000,8192,1,500,nan\n' >"$WORK/nan.csv"
"$TESSERA" trace-bench --nodes "$WORK/nodes.csv" --pods "$WORK/nan.csv" --policy fgd --seeds 42 \
  --json "$WORK/nan.json" >"$WORK/o8" 2>"$WORK/e8"
check "  a gpu_spec of nan: placed anywhere, no warning" python3 -c "
import json, sys
r = json.load(open('$WORK/nan.json'))['runs'][0]
sys.exit(0 if r['alloc_pct']['100'] > 99 and not open('$WORK/e8').read() else 1)"
# More than ten shapes never placed: the ten commonest are named, the rest counted.
{
  echo "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec"
  for i in $(seq 1 12); do echo "openb-pod-big$i,$((100000 + i)),8192,1,500,"; done
  echo "openb-pod-fits,4000,8192,1,500,"
} >"$WORK/big.csv"
"$TESSERA" trace-bench --nodes "$WORK/nodes.csv" --pods "$WORK/big.csv" --policy fgd --seeds 42 \
  >/dev/null 2>"$WORK/e9"
check "  more than ten shapes: ten named, the rest counted" \
  grep -q "100010m CPU, 8192 MiB, 500 milli-GPU x1; and 2 other shapes (the most on one node" "$WORK/e9"
# Arrivals and allocation are shares of the GPU capacity: CPU-only pods (which never reach it:
# the inflation used to run until memory ran out) and a node list without GPUs are refused.
printf 'name,cpu_milli,memory_mib,num_gpu,gpu_milli\nopenb-pod-a,4000,8192,0,0\n' >"$WORK/cpu.csv"
timeout 60 "$TESSERA" trace-bench --nodes "$WORK/nodes.csv" --pods "$WORK/cpu.csv" --seeds 42 \
  >/dev/null 2>"$WORK/e10"
check "CPU-only pods refused" test $? -eq 1
check "  and why" grep -q "cpu.csv: no pod asks for a GPU (every num_gpu is 0)" "$WORK/e10"
printf 'sn,cpu_milli,memory_mib,gpu,model\nopenb-node-a,96000,786432,0,\n' >"$WORK/cpunodes.csv"
"$TESSERA" trace-bench --nodes "$WORK/cpunodes.csv" --pods "$WORK/nan.csv" --seeds 42 \
  >/dev/null 2>"$WORK/e11"
check "a node list without GPUs refused" test $? -eq 1
check "  and why" grep -q "cpunodes.csv: no node has a GPU (every gpu is 0)" "$WORK/e11"
echo "openb-pod-x,1,1,2,500" >>"$WORK/pods.csv"
"$TESSERA" trace-bench --nodes "$WORK/nodes.csv" --pods "$WORK/pods.csv" 2>"$WORK/e3"
check "bad row names line" grep -q 'pods.csv:302: num_gpu 2 with gpu_milli 500' "$WORK/e3"
echo "trace_bench_test: $passed passed, $failed failed"
test "$failed" -eq 0
