#!/usr/bin/env bash
# `tessera sim autoscale` end to end on a small generated Azure-format trace: the table, the
# frontier of --sweep, the JSON shape of the autoscaler issue, --warmup (fewer requests measured)
# and located errors for bad input. Usage: sim_autoscale_test.sh path/to/tessera
set -u
TESSERA=${1:?usage: sim_autoscale_test.sh path/to/tessera}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

azure_trace "$WORK/trace.csv" 3

"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --format azure --rate-scale 8 \
  --policy tessera,keda-queue,hpa-cpu,fixed,clairvoyant --sweep --json "$WORK/all.json" >"$WORK/all.out" 2>&1
check "sweep exits 0" test $? = 0
check "prints the frontier" grep -q "^policy  *90.0%  *95.0%  *98.0%  *99.0%  *99.5%" "$WORK/all.out"
check "and a frontier row per policy" test "$(grep -cE '^(tessera|keda-queue|hpa-cpu|fixed|clairvoyant) +([0-9]+\.[0-9]+|-) ' "$WORK/all.out")" = 5
python3 - "$WORK/all.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["trace"].endswith("trace.csv"), d["trace"]
keys = {"policy", "params", "gpu_hours", "busy_gpu_hours", "utilization", "slo_attainment",
        "p50_wait_s", "p99_wait_s", "requests", "over_60s", "cold_starts"}
count = {}
for r in d["runs"]:
    assert keys <= set(r), sorted(keys - set(r))
    assert 0 <= r["slo_attainment"] <= 1 and r["gpu_hours"] >= r["busy_gpu_hours"] > 0, r
    assert abs(r["utilization"] - r["busy_gpu_hours"] / r["gpu_hours"]) < 1e-9, r
    count[r["policy"]] = count.get(r["policy"], 0) + 1
# tessera sweeps both of its main knobs (8 utilisation + 6 queue targets), keda-queue and hpa-cpu
# theirs, and every dynamic policy the same floors (1, 2, 4, 8, 16, 24, 32; hpa-cpu's main knob
# already runs at its floor of one).
# clairvoyant: 12 planned utilisations x 5 averaging windows.
assert count == {"tessera": 21, "keda-queue": 14, "hpa-cpu": 15, "fixed": 12, "clairvoyant": 60}, count
# Foresight is never beaten: at each attainment another policy reaches, the clairvoyant
# reference reaches it with at most the GPU-hours of the cheapest static provisioning that does.
def cheapest(kind, level):
    c = [r["gpu_hours"] for r in d["runs"] if r["policy"] == kind and r["slo_attainment"] >= level]
    return min(c) if c else None
for level in (0.9, 0.95, 0.99):
    f, c = cheapest("fixed", level), cheapest("clairvoyant", level)
    assert f is None or (c is not None and c <= f), (level, c, f)
for kind in ("tessera", "keda-queue", "hpa-cpu"):
    floors = sorted(r["params"]["min_replicas"] for r in d["runs"]
                    if r["policy"] == kind and r["params"]["min_replicas"] > 1)
    assert floors == [2, 4, 8, 16, 24, 32], (kind, floors)
    ones = [r for r in d["runs"] if r["policy"] == kind and r["params"]["min_replicas"] == 1]
    assert len(ones) == (9 if kind == "hpa-cpu" else 1), (kind, len(ones))
    # A floor is up from the start: never fewer GPU-hours than the floor's share of the trace.
    fixed4 = [r for r in d["runs"] if r["policy"] == "fixed" and r["params"]["replicas"] == 4][0]
    r4 = [r for r in d["runs"] if r["policy"] == kind and r["params"]["min_replicas"] == 4][0]
    assert r4["gpu_hours"] >= fixed4["gpu_hours"] - 1e-9, (kind, r4["gpu_hours"], fixed4["gpu_hours"])
PY
check "JSON in the issue's shape, every sweep point" test $? = 0

# A load 4 times larger (--rate-scale 32) needs more replicas than the grids above: the floors
# and static counts go on (48, 64, ...) until they reach 8 times the mean busy replicas, and the
# largest static count then serves every request within the SLO.
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --format azure --rate-scale 32 \
  --policy keda-queue,fixed --sweep --json "$WORK/big.json" >/dev/null 2>&1
check "the grids scale with the load" python3 - "$WORK/big.json" <<'PY'
import json, sys
runs = json.load(open(sys.argv[1]))["runs"]
span = 1200
busy = runs[0]["busy_gpu_hours"] * 3600 / span  # mean busy replicas, about 14
static = [r["params"]["replicas"] for r in runs if r["policy"] == "fixed"]
floors = [r["params"]["min_replicas"] for r in runs if r["policy"] == "keda-queue"
          and r["params"]["min_replicas"] > 0]
assert static[:12] == [1, 2, 4, 6, 8, 10, 12, 16, 20, 24, 32, 40], static
assert floors[:7] == [1, 2, 4, 8, 16, 24, 32], floors
for grid in (static, floors):
    assert grid[-1] >= 8 * busy > grid[-2], (busy, grid)
    assert all(b > a for a, b in zip(grid, grid[1:])), grid
top = [r for r in runs if r["policy"] == "fixed" and r["params"]["replicas"] == static[-1]][0]
assert top["slo_attainment"] == 1, top
PY

"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --policy fixed --min-replicas 4 --json "$WORK/cold.json" >/dev/null
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --policy fixed --min-replicas 4 --warmup 5m \
  --json "$WORK/warm.json" >"$WORK/warm.out"
check "--warmup is stated" grep -q "measured after a 5m warm-up" "$WORK/warm.out"
python3 - "$WORK/cold.json" "$WORK/warm.json" <<'PY'
import json, sys
cold, warm = (json.load(open(p))["runs"][0] for p in sys.argv[1:3])
assert warm["requests"] < cold["requests"], (warm["requests"], cold["requests"])
# Static provisioning: 4 replicas for the measured span only (15 of 20 minutes).
assert abs(warm["gpu_hours"] / cold["gpu_hours"] - 0.75) < 0.02, (warm["gpu_hours"], cold["gpu_hours"])
PY
check "--warmup measures only what follows it" test $? = 0

# The same arrivals written as the 2024 one-week release writes them (an offset, here +02:00, and
# no fraction on a whole second) replay to the same runs.
python3 - "$WORK/trace.csv" "$WORK/trace2024.csv" <<'PY'
import datetime, sys
src, dst = sys.argv[1:3]
whole = 0
with open(src) as f, open(dst, "w") as out:
    out.write(next(f))
    prev = None
    for line in f:
        stamp, rest = line.rstrip("\n").split(",", 1)
        t = datetime.datetime.strptime(stamp[:26], "%Y-%m-%d %H:%M:%S.%f") + datetime.timedelta(hours=2)
        text = t.strftime("%Y-%m-%d %H:%M:%S.%f")
        if t.microsecond < 50000 and (prev is None or t.replace(microsecond=0) >= prev):
            t = t.replace(microsecond=0)  # a whole second (moves the row by under 50 ms)
            text = t.strftime("%Y-%m-%d %H:%M:%S")
            whole += 1
        prev = t
        out.write(f"{text}+02:00,{rest}\n")
assert whole > 0, "no whole-second row written"
PY
"$TESSERA" sim autoscale --trace "$WORK/trace2024.csv" --policy tessera,fixed --min-replicas 4 \
  --json "$WORK/w24.json" >/dev/null 2>&1
check "2024-form timestamps are read" test $? = 0
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --policy tessera,fixed --min-replicas 4 \
  --json "$WORK/w23.json" >/dev/null 2>&1
python3 - "$WORK/w23.json" "$WORK/w24.json" <<'PY'
import json, sys
a, b = (json.load(open(p))["runs"] for p in sys.argv[1:3])
assert len(a) == len(b) == 2
for x, y in zip(a, b):
    assert x["requests"] == y["requests"], (x, y)
    assert abs(x["gpu_hours"] - y["gpu_hours"]) < 0.02 * x["gpu_hours"], (x, y)
    assert abs(x["slo_attainment"] - y["slo_attainment"]) < 0.01, (x, y)
PY
check "and replay like the 2023 form" test $? = 0

# Bad input: exit 1, located messages, nothing written.
printf 'TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:00:00.0000000,12,x\n' >"$WORK/bad.csv"
"$TESSERA" sim autoscale --trace "$WORK/bad.csv" --json "$WORK/bad.json" 2>"$WORK/err" >/dev/null
check "a malformed row: exit 1" test $? = 1
check "naming file, line and field" grep -q 'bad.csv:2:.*GeneratedTokens: expected a whole number' "$WORK/err"
check "and writing no JSON" test ! -e "$WORK/bad.json"
# A rate no memory holds (a counter read as a rate, a unit slip): refused at once, located.
printf '0,0.5,1,Gamma,1,2\n600,1000000000,1,Gamma,1,0.000000001\n1200,0,0,,0,0\n' >"$WORK/flood.csv"
timeout 20 "$TESSERA" sim autoscale --trace "$WORK/flood.csv" --format servegen --json "$WORK/flood.json" \
  2>"$WORK/err" >/dev/null
check "a trace too large to replay: exit 1 at once" test $? = 1
check "naming its size and busiest line" grep -q 'flood.csv: the replay would hold about 6e+11 requests (most from line 2: 1e+09 requests/s for 600s x --rate-scale 1)' "$WORK/err"
check "and writing no JSON" test ! -e "$WORK/flood.json"
"$TESSERA" sim autoscale --trace "$WORK/flood.csv" --format servegen --duration 10m --policy fixed >/dev/null
check "--duration short of the flood replays the rest" test $? = 0
# --duration ends the replay inside a window: 15 of 20 minutes at 2 requests/s.
printf '0,2,1,Gamma,1,0.5\n600,2,1,Gamma,1,0.5\n1200,0,0,,0,0\n' >"$WORK/steady.csv"
for d in 15m 20m; do
  "$TESSERA" sim autoscale --trace "$WORK/steady.csv" --format servegen --duration $d --policy fixed \
    --json "$WORK/steady-$d.json" >/dev/null
done
check "--duration cuts a window" python3 -c "
import json, sys
n = {d: json.load(open('$WORK/steady-%s.json' % d))['runs'][0]['requests'] for d in ('15m', '20m')}
sys.exit(not (1650 <= n['15m'] <= 1950 and 2200 <= n['20m'] <= 2600))"
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --warmup 2h 2>"$WORK/err" >/dev/null
check "a warm-up past the trace's end is refused" grep -q 'leaves no request to measure' "$WORK/err"
# A warm-up ending at the last arrival still measures it: a one-request trace is a run, not an
# error; `fixed` at the default --min-replicas 0 runs (and reports) its one replica.
printf 'TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:05.0,100,10\n' >"$WORK/one.csv"
"$TESSERA" sim autoscale --trace "$WORK/one.csv" --policy tessera,fixed --json "$WORK/one.json" \
  >/dev/null 2>"$WORK/err"
check "a one-request trace is measured" python3 -c "
import json, sys
runs = json.load(open('$WORK/one.json'))['runs']
sys.exit(not (len(runs) == 2 and all(r['requests'] == 1 and r['slo_attainment'] == 1 for r in runs)
              and runs[1]['params']['replicas'] == 1))"
# An idle service is measured (what its floor costs) with a warning that its SLO attainment is
# of no requests; --duration 0s is refused; flags are named.
"$TESSERA" sim autoscale --trace "$WORK/one.csv" --duration 0s 2>"$WORK/err" >/dev/null
check "--duration 0s is refused" grep -q -- '--duration 0s: expected more than 0s' "$WORK/err"
printf '0,0,1,Gamma,1,0.5\n600,0,1,Gamma,1,0.5\n' >"$WORK/idle.csv"
"$TESSERA" sim autoscale --trace "$WORK/idle.csv" --format servegen --min-replicas 1 \
  --json "$WORK/idle.json" 2>"$WORK/err" >/dev/null
check "a trace with no request to replay is measured" python3 -c "
import json, sys
r = json.load(open('$WORK/idle.json'))['runs'][0]
sys.exit(not (r['requests'] == 0 and abs(r['gpu_hours'] - 20 / 60) < 0.01))"
check "  with a warning" grep -q "warning: --trace $WORK/idle.csv: no request to replay at --rate-scale 1: the runs measure an idle service" "$WORK/err"
# An Azure trace cut by --duration ends at the cut: a static replica pays up to it, not only up
# to the last arrival before it (0 s here; the next is at 10 minutes).
printf 'TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:00:00.0,100,10\n2023-11-16 18:10:00.0,100,10\n' >"$WORK/gap.csv"
"$TESSERA" sim autoscale --trace "$WORK/gap.csv" --policy fixed --duration 5m --json "$WORK/gap.json" \
  >/dev/null 2>&1
check "an Azure trace cut by --duration is measured to the cut" python3 -c "
import json, sys
r = json.load(open('$WORK/gap.json'))['runs'][0]
sys.exit(not (r['requests'] == 1 and abs(r['gpu_hours'] - 300 / 3600) < 0.001))"
"$TESSERA" sim autoscale --trace "$WORK/one.csv" --min-replicas 1000 2>"$WORK/err" >/dev/null
check "--min-replicas beyond the simulator's ceiling is named" \
  grep -q -- "--min-replicas 1000: expected 0 to 200 (the simulator's most replicas)" "$WORK/err"
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --policy tessera,magic 2>"$WORK/err" >/dev/null
check "an unknown policy is named" grep -q 'policy magic: expected tessera, keda-queue, hpa-cpu, fixed or clairvoyant' "$WORK/err"
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --sweep --json "$WORK" 2>"$WORK/err" >"$WORK/dir.out"
check "a directory as --json is refused" grep -q -- "--json: $WORK: is a directory, expected a file" "$WORK/err"
check "a directory as --json is refused before the runs" test ! -s "$WORK/dir.out"
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --format parquet 2>"$WORK/err" >/dev/null
check "an unknown format is named" grep -q 'format parquet: expected azure, servegen or prom-range' "$WORK/err"
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --rate-scale 4 --rate-mode independent \
  --policy fixed --min-replicas 8 --json "$WORK/indep.json" >"$WORK/indep.out"
check "--rate-mode independent is stated" grep -q "(4 independent copies)" "$WORK/indep.out"
python3 - "$WORK/indep.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["runs"][0]
assert r["requests"] > 0 and r["slo_attainment"] > 0, r
PY
check "and runs" test $? = 0
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --policy tessera --scale-down-window 2m \
  --json "$WORK/window.json" >/dev/null
check "--scale-down-window sets tessera's window" python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))['runs'][0]
assert r['params']['scale_down_window_s'] == 120, r['params']" "$WORK/window.json"
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --scale-down-window soon 2>"$WORK/err" >/dev/null
check "a bad window is named" grep -q 'scale-down-window soon: expected a duration' "$WORK/err"
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --rate-scale 8 --policy tessera \
  --scale-down-window 20m --json "$WORK/highest.json" >/dev/null
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --rate-scale 8 --policy tessera \
  --scale-down-window 20m --scale-down-quantile 0.5 --json "$WORK/quantile.json" >"$WORK/quantile.out"
check "--scale-down-quantile sets tessera's quantile, and holding the median costs less" python3 -c "
import json, sys
h, q = (json.load(open(p))['runs'][0] for p in sys.argv[1:3])
assert h['params']['scale_down_quantile'] == 1 and q['params']['scale_down_quantile'] == 0.5, q
assert q['gpu_hours'] < h['gpu_hours'], (q, h)" "$WORK/highest.json" "$WORK/quantile.json"
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --scale-down-quantile 1.5 2>"$WORK/err" >/dev/null
check "a quantile above 1 is named" grep -q 'scale-down-quantile 1.5: expected a fraction above 0 and at most 1' "$WORK/err"
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --rate-mode sideways 2>"$WORK/err" >/dev/null
check "an unknown rate mode is named" grep -q 'rate-mode sideways: expected dense or independent' "$WORK/err"
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --format servegen --rate-mode independent 2>"$WORK/err" >/dev/null
check "independent copies are for azure traces only" grep -q 'applies to --format azure only' "$WORK/err"
# HPA's tolerance reaches every HPA-driven policy: a wide one skips most changes.
for tol in 0 0.9; do
  "$TESSERA" sim autoscale --trace "$WORK/trace.csv" --rate-scale 8 --policy keda-queue,tessera \
    --hpa-tolerance $tol --json "$WORK/tol$tol.json" >/dev/null
done
python3 - "$WORK/tol0.json" "$WORK/tol0.9.json" <<'PY'
import json, sys
tight, wide = (json.load(open(p))["runs"] for p in sys.argv[1:3])
for a, b in zip(tight, wide):
    assert b["cold_starts"] < a["cold_starts"], (a["policy"], a["cold_starts"], b["cold_starts"])
PY
check "--hpa-tolerance changes what HPA acts on" test $? = 0
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --hpa-tolerance 1 2>"$WORK/err" >/dev/null
check "a tolerance of 1 is refused" grep -q 'hpa-tolerance: expected a fraction' "$WORK/err"
# --config: tessera runs the knobs of a service in a scaler config, as `tessera scaler` would.
# A config at the defaults replays exactly like the flags' defaults at its 5 s pollInterval; a
# changed knob changes the run and is reported; the expected coldStart is the config's, the
# simulated one --cold-start's.
cat >"$WORK/scaler.yaml" <<'YAML'
apiVersion: tessera.io/v1alpha1
kind: ScalerConfig
prometheus: {url: "http://127.0.0.1:9090"}
services:
  - {name: defaults, server: vllm, model: a, deployment: a, maxReplicas: 200}
  - name: lean
    server: vllm
    model: b
    deployment: b
    targetQueuePerReplica: 32
    targetUtilization: 0.9
    utilizationBand: 0.05
    minReplicas: 2
    maxReplicas: 6
    scaleDownWindow: 3m
    coldStart: 20s
YAML
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --rate-scale 8 --policy tessera \
  --poll-interval 5s --json "$WORK/flags.json" >/dev/null
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --rate-scale 8 --policy tessera \
  --config "$WORK/scaler.yaml" --service defaults --json "$WORK/cfg.json" >"$WORK/cfg.out"
check "--config names the service it runs" grep -q "tessera: service defaults of .*scaler.yaml" "$WORK/cfg.out"
check "a config at the defaults replays like the defaults" python3 -c "
import json, sys
a, b = (json.load(open(p))['runs'][0] for p in sys.argv[1:3])
assert a == b, (a, b)
assert a['params']['poll_interval_s'] == 5, a['params']" "$WORK/flags.json" "$WORK/cfg.json"
check "--config decides at its pollInterval" grep -q "deciding every 5s as its pollInterval says" "$WORK/cfg.out"
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --rate-scale 8 --policy tessera \
  --json "$WORK/sync.json" >/dev/null
check "without --poll-interval: one decision per HPA sync" python3 -c "
import json, sys
assert 'poll_interval_s' not in json.load(open(sys.argv[1]))['runs'][0]['params']" "$WORK/sync.json"
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --poll-interval 0s 2>"$WORK/err" >/dev/null
check "a poll interval of 0 is refused" grep -q 'poll-interval 0s: expected at least 100ms' "$WORK/err"
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --slo-wait 0s 2>"$WORK/err" >/dev/null
check "an SLO below the simulator's step is refused" grep -q 'slo-wait 0s: expected at least 50ms' "$WORK/err"
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --rate-scale 8 --policy tessera,keda-queue \
  --config "$WORK/scaler.yaml" --service lean --json "$WORK/lean.json" >/dev/null
check "a service's knobs are tessera's, not the baselines'" python3 -c "
import json, sys
runs = json.load(open(sys.argv[1]))['runs']
t, k = runs
p = t['params']
assert (p['target_queue_per_replica'], p['target_utilization'], p['utilization_band'],
        p['min_replicas'], p['max_replicas'], p['scale_down_window_s'], p['cold_start_s']) == \
       (32, 0.9, 0.05, 2, 6, 180, 20), p
assert k['params']['min_replicas'] == 0, k['params']
# Its floor of 2 is paid over the whole trace, its ceiling of 6 holds.
assert t['gpu_hours'] >= 2 * 1200 / 3600 - 1e-9, t
" "$WORK/lean.json"
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --rate-scale 8 --policy tessera --sweep \
  --config "$WORK/scaler.yaml" --service lean --json "$WORK/leansweep.json" >/dev/null
check "--sweep from a service's knobs keeps within its ceiling" python3 -c "
import json, sys
runs = json.load(open(sys.argv[1]))['runs']
floors = sorted(r['params']['min_replicas'] for r in runs)
# The swept floors 1, 2 and 4 (8-32 exceed maxReplicas 6); the main knobs keep the service's 2.
assert floors[0] == 1 and floors[-1] == 4 and floors.count(2) == len(runs) - 2, floors
assert all(r['params']['max_replicas'] == 6 and r['params']['scale_down_window_s'] == 180
           for r in runs), runs
" "$WORK/leansweep.json"
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --config "$WORK/scaler.yaml" 2>"$WORK/err" >/dev/null
check "two services and no --service: both named" grep -q 'has 2 services (defaults, lean): choose one with --service' "$WORK/err"
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --config "$WORK/scaler.yaml" --service big 2>"$WORK/err" >/dev/null
check "an unknown service is named" grep -q 'service big: not in .*scaler.yaml (its services: defaults, lean)' "$WORK/err"
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --config "$WORK/scaler.yaml" --service lean \
  --scale-down-window 5m 2>"$WORK/err" >/dev/null
check "a tessera flag beside --config is refused" grep -q 'scale-down-window with --config: .*set scaleDownWindow there' "$WORK/err"
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --config "$WORK/scaler.yaml" --service lean \
  --scale-down-quantile 0.9 2>"$WORK/err" >/dev/null
check "so is --scale-down-quantile" grep -q 'scale-down-quantile with --config: .*set scaleDownQuantile there' "$WORK/err"
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --config "$WORK/scaler.yaml" --service lean \
  --poll-interval 15s 2>"$WORK/err" >/dev/null
check "so is --poll-interval (the config's pollInterval applies)" grep -q 'poll-interval with --config: .*set prometheus.pollInterval there' "$WORK/err"
sed 's/targetUtilization: 0.9/targetUtilization: 1.5/' "$WORK/scaler.yaml" >"$WORK/bad.yaml"
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --config "$WORK/bad.yaml" --service lean \
  --json "$WORK/badcfg.json" 2>"$WORK/err" >/dev/null
check "a bad knob: exit 1" test $? = 1
check "located in the config" grep -q 'bad.yaml:1[0-9]:.*targetUtilization' "$WORK/err"
check "and no JSON written" test ! -e "$WORK/badcfg.json"
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --service lean 2>"$WORK/err" >/dev/null
check "--service needs --config" grep -q 'service: needs --config' "$WORK/err"
# --format prom-range: a service's own request rate from Prometheus (a query_range body), here
# 20 minutes at 15 s steps with a 2-minute burst and a 5-minute stretch where the series is absent
# (nothing served); arrivals are Poisson at each step's rate.
python3 - "$WORK/range.json" <<'PY'
import json, sys
t0, values, expected = 1764700000, [], 0.0
for i in range(80):
    t = t0 + 15 * i
    if 40 <= i < 60:
        continue  # absent: rate 0
    r = 40.0 if 20 <= i < 28 else 4.0
    values.append([t, repr(r)])
    expected += 15 * r
json.dump({"status": "success", "data": {"resultType": "matrix",
           "result": [{"metric": {}, "values": values}]}}, open(sys.argv[1], "w"))
open(sys.argv[1] + ".expected", "w").write(str(expected))
PY
"$TESSERA" sim autoscale --trace "$WORK/range.json" --format prom-range --policy tessera,keda-queue \
  --json "$WORK/range.out.json" >/dev/null 2>"$WORK/err"
check "prom-range: runs" test $? = 0
check "prom-range: the requests the rates imply" python3 -c "
import json, sys
runs = json.load(open(sys.argv[1]))['runs']
want = float(open(sys.argv[2]).read())
assert len(runs) == 2 and all(abs(r['requests'] - want) < 0.05 * want for r in runs), (want, runs)
" "$WORK/range.out.json" "$WORK/range.json.expected"
echo '{"status":"success","data":{"resultType":"vector","result":[]}}' >"$WORK/instant.json"
"$TESSERA" sim autoscale --trace "$WORK/instant.json" --format prom-range 2>"$WORK/err" >/dev/null
check "an instant query's body is refused, located" grep -q 'instant.json:1:42: data.resultType: expected "matrix"' "$WORK/err"
# A job that brings 20 requests/s from minute 30 to 40 of every hour, 0.05 requests/s otherwise,
# for six hours: from the fourth hour on, tessera's seasonal rule (seasonalPeriods 1h, 24h by
# default, 3 repeats) starts its replicas ahead of it, so the burst does not wait a cold start.
python3 -c "
for i in range(36):
    r = 20 if i % 6 == 3 else 0.05
    print(f'{i * 600},{r},1,Gamma,1,{1 / r}')
" >"$WORK/hourly.csv"
for sp in none 1h,24h; do
  "$TESSERA" sim autoscale --trace "$WORK/hourly.csv" --format servegen --policy tessera \
    --seasonal-periods $sp --json "$WORK/hourly-$sp.json" >/dev/null
done
check "a recurring burst met ahead: higher SLO attainment for fewer GPU-hours" python3 -c "
import json, sys
off, on = (json.load(open(sys.argv[i]))['runs'][0] for i in (1, 2))
assert on['slo_attainment'] > off['slo_attainment'] + 0.03, (on, off)
assert on['gpu_hours'] < off['gpu_hours'] and on['cold_starts'] < off['cold_starts'], (on, off)
" "$WORK/hourly-none.json" "$WORK/hourly-1h,24h.json"
# A scaler restarted every hour never holds three hours of history of its own: the burst is met
# ahead only when the history is rebuilt on start (from Prometheus, in the scaler).
for bf in on off; do
  "$TESSERA" sim autoscale --trace "$WORK/hourly.csv" --format servegen --policy tessera \
    --scaler-restarts 1h --scaler-backfill $bf --json "$WORK/hourly-restarts-$bf.json" \
    >"$WORK/hourly-restarts-$bf.out"
done
check "restarts are announced" grep -q "the scaler restarts every 1h, its history (recurring load, batch, window, idle clock, trend) lost" "$WORK/hourly-restarts-off.out"
check "restarted hourly: the history rebuilt meets the burst as without restarts; lost, as without the rule" python3 -c "
import json, sys
on, off, none, kept = (json.load(open(sys.argv[i]))['runs'][0] for i in (1, 2, 3, 4))
assert on['slo_attainment'] > off['slo_attainment'] + 0.03, (on, off)
assert on['cold_starts'] < off['cold_starts'], (on, off)
assert abs(off['slo_attainment'] - none['slo_attainment']) < 0.01, (off, none)
assert abs(on['slo_attainment'] - kept['slo_attainment']) < 0.01, (on, kept)
" "$WORK/hourly-restarts-on.json" "$WORK/hourly-restarts-off.json" "$WORK/hourly-none.json" \
  "$WORK/hourly-1h,24h.json"
"$TESSERA" sim autoscale --trace "$WORK/hourly.csv" --format servegen --scaler-restarts 30s \
  2>"$WORK/err" >/dev/null
check "--scaler-restarts under a minute is refused" grep -q 'scaler-restarts 30s: expected at least 1m' "$WORK/err"
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --config "$WORK/scaler.yaml" --service lean \
  --scaler-backfill off 2>"$WORK/err" >/dev/null
check "--scaler-backfill beside --config is refused" grep -q 'scaler-backfill with --config: .*set prometheus.backfill there' "$WORK/err"
"$TESSERA" sim autoscale --trace "$WORK/hourly.csv" --format servegen --seasonal-periods 1h,90s \
  2>"$WORK/err" >/dev/null
check "a seasonal period of part of a minute is refused" grep -q 'seasonalPeriods: expected durations of whole minutes, above 0' "$WORK/err"
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --config "$WORK/scaler.yaml" --service lean \
  --seasonal-periods none 2>"$WORK/err" >/dev/null
check "--seasonal-periods beside --config is refused" grep -q 'seasonal-periods with --config: .*set seasonalPeriods there' "$WORK/err"
# --recommend: the cheapest of tessera's swept points that reaches the attainment asked for, its
# knobs printed as ScalerConfig fields; with --holdout chosen before the last part, measured on it.
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --rate-scale 8 --policy tessera,keda-queue \
  --recommend 0.95 --json "$WORK/rec.json" >"$WORK/rec.out" 2>&1
check "--recommend exits 0 when a point reaches the target" test $? = 0
check "and prints its knobs as config fields" grep -qE '^    targetQueuePerReplica: [0-9.]+$' "$WORK/rec.out"
check "the recommendation is the cheapest tessera point reaching the target" python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
t = [r for r in d['runs'] if r['policy'] == 'tessera']
# --recommend sweeps tessera even without --sweep: the grid's 21 points, then the 11 other
# scale-down holds (windows 5-30m x quantiles 1, 0.9, 0.85) around the cheapest reaching it.
assert len(t) == 32, len(t)
assert len([r for r in d['runs'] if r['policy'] == 'keda-queue']) == 1  # the others as asked
grid, held = t[:21], t[21:]
assert all(r['params']['scale_down_window_s'] == 600 and r['params']['scale_down_quantile'] == 1
           for r in grid)
holds = {(r['params']['scale_down_window_s'], r['params']['scale_down_quantile']) for r in held}
assert holds == {(w, q) for w in (300, 600, 1200, 1800) for q in (1, 0.9, 0.85)} - {(600, 1)}, holds
rec = d['recommendation']
assert rec['slo_target'] == 0.95 and 'held_out' not in rec, rec
cheapest = min(r['gpu_hours'] for r in grid if r['slo_attainment'] >= 0.95)
around = [r for r in grid if r['slo_attainment'] >= 0.95 and r['gpu_hours'] == cheapest][0]['params']
knobs = ('target_utilization', 'target_queue_per_replica', 'min_replicas')
assert all(r['params'][k] == around[k] for r in held for k in knobs), around
# Holding less replaces the grid's choice only by passing the halves' check: a cheaper hold
# reaching it over the span is chosen, or counted as rejected.
cheaper = sorted(r['gpu_hours'] for r in held if r['slo_attainment'] >= 0.95 and r['gpu_hours'] < cheapest)
n = rec['rejected_on_halves']
assert rec['chosen']['gpu_hours'] == (cheaper[n] if n < len(cheaper) else cheapest), (rec, cheaper)
assert rec['chosen']['slo_attainment'] >= 0.95 and rec['params'] == rec['chosen']['params'], rec
assert rec['base']['params']['target_utilization'] == 0.75, rec['base']
" "$WORK/rec.json"
# The scale-down hold around the grid's choice: a steady load for 20 minutes, then a quarter of it
# with 30-second bursts every 400 s. A hold shorter than the grid's that reaches the target over
# the whole replay is chosen only when it reaches it on each half as well.
python3 - "$WORK/bursty.csv" <<'PY'
import datetime, random, sys
random.seed(5)
t0 = datetime.datetime(2023, 11, 16, 18, 0, 0)
t = 0.0
with open(sys.argv[1], "w") as f:
    f.write("TIMESTAMP,ContextTokens,GeneratedTokens\n")
    while True:
        rate = 60 if any(a < t < a + 30 for a in (1400, 1800, 2200)) else (6 if t < 1200 else 1.5)
        t += random.expovariate(rate)
        if t >= 2400:
            break
        stamp = (t0 + datetime.timedelta(seconds=t)).strftime("%Y-%m-%d %H:%M:%S.%f")
        f.write(f"{stamp}0,{random.randint(200, 4000)},{random.randint(10, 400)}\n")
PY
# `halves REC.json RUN.json`: the SLO attainment of tessera with RUN's knobs on the replay before
# REC's split and after it, as separate replays.
halves() {
  local mid window quantile floor
  read -r mid window quantile floor < <(python3 -c "
import json, sys
rec = json.load(open(sys.argv[1]))['recommendation']
p = json.load(open(sys.argv[2]))['params']
assert (p['target_utilization'], p['target_queue_per_replica']) == (0.75, 4), p
print(rec['halves_split_s'], int(p['scale_down_window_s']), p['scale_down_quantile'],
      int(p['min_replicas']))" "$1" "$2")
  for part in "--duration ${mid}s" "--warmup ${mid}s"; do
    # shellcheck disable=SC2086 # $part is two words
    "$TESSERA" sim autoscale --trace "$WORK/bursty.csv" --policy tessera --scale-down-window \
      "${window}s" --scale-down-quantile "$quantile" --min-replicas "$floor" $part --json "$WORK/half.json" >/dev/null || return 1
    python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['runs'][0]['slo_attainment'])" "$WORK/half.json"
  done | tr '\n' ' '
}
"$TESSERA" sim autoscale --trace "$WORK/bursty.csv" --policy tessera --recommend 0.98 \
  --json "$WORK/hold.json" >"$WORK/hold.out" 2>&1
check "a shorter scale-down hold can be the choice" python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
rec = d['recommendation']
p = rec['params']
assert (p['scale_down_window_s'], p['scale_down_quantile']) != (600, 1), p
assert rec['rejected_on_halves'] == 0, rec
json.dump(rec['chosen'], open(sys.argv[2], 'w'))
cheapest = min(r['gpu_hours'] for r in d['runs'][:21] if r['slo_attainment'] >= 0.98)
assert rec['chosen']['gpu_hours'] < cheapest, (rec['chosen'], cheapest)" "$WORK/hold.json" "$WORK/hold-run.json"
check "printed as the config's scale-down fields" grep -qE '^    scaleDownWindow: [0-9]+m$' "$WORK/hold.out"
read -r first second <<<"$(halves "$WORK/hold.json" "$WORK/hold-run.json")"
check "reaching the target on each half ($first, $second)" python3 -c "
import sys; assert min(map(float, sys.argv[1:])) >= 0.98, sys.argv" "$first" "$second"
"$TESSERA" sim autoscale --trace "$WORK/bursty.csv" --policy tessera --recommend 0.99 \
  --json "$WORK/hold99.json" >"$WORK/hold99.out" 2>&1
check "holds that miss it on a half are not chosen" python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
rec = d['recommendation']
assert rec['rejected_on_halves'] > 0 and rec['params']['scale_down_window_s'] == 600, rec
held = [r for r in d['runs'][21:] if r['slo_attainment'] >= 0.99 and r['gpu_hours'] < rec['chosen']['gpu_hours']]
assert len(held) == rec['rejected_on_halves'], (len(held), rec)
json.dump(min(held, key=lambda r: r['gpu_hours']), open(sys.argv[2], 'w'))" "$WORK/hold99.json" "$WORK/rejected-run.json"
check "and say so" grep -qE '^  \([0-9]+ cheaper scale-down holds reached it over the span but not on each half of it: not chosen\)$' "$WORK/hold99.out"
read -r first second <<<"$(halves "$WORK/hold99.json" "$WORK/rejected-run.json")"
check "the cheapest of them misses it on a half ($first, $second)" python3 -c "
import sys; assert min(map(float, sys.argv[1:])) < 0.99, sys.argv" "$first" "$second"
# A ceiling of one replica under eight times the load: no point of the sweep reaches 99%.
cat >"$WORK/one.yaml" <<'YAML'
apiVersion: tessera.io/v1alpha1
kind: ScalerConfig
prometheus: {url: "http://127.0.0.1:9090"}
services:
  - {name: one, server: vllm, model: a, deployment: a, maxReplicas: 1}
YAML
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --rate-scale 8 --policy tessera \
  --config "$WORK/one.yaml" --recommend 0.99 --json "$WORK/none.json" >"$WORK/none.out" 2>"$WORK/err"
check "a target no point reaches exits 1" test $? = 1
check "naming the highest reached" grep -q 'recommend 0.99: no point of tessera.s sweep reaches 99% (the highest: .*than its ceiling (maxReplicas 1; the simulator.s most is 200)' "$WORK/err"
check "and printing it beside the base knobs" grep -q '^  none reaches it; the highest: ' "$WORK/none.out"
check "and still writes the runs, with no choice" python3 -c "
import json, sys
rec = json.load(open(sys.argv[1]))['recommendation']
assert rec['params'] is None and rec['chosen'] is None, rec" "$WORK/none.json"
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --recommend 99 2>"$WORK/err" >/dev/null
check "a target above 1 is named" grep -q 'recommend 99: expected a fraction above 0 and at most 1' "$WORK/err"
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --policy keda-queue --recommend 0.99 2>"$WORK/err" >/dev/null
check "--recommend needs tessera" grep -q 'recommend: needs tessera in --policy (keda-queue)' "$WORK/err"
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --holdout 5m 2>"$WORK/err" >/dev/null
check "--holdout needs --recommend" grep -q 'holdout: needs --recommend' "$WORK/err"
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --recommend 0.99 --holdout 1h 2>"$WORK/err" >/dev/null
check "a holdout longer than the replay is refused" grep -q 'holdout 1h: leaves nothing to choose on (the replay ends at ' "$WORK/err"
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --config "$WORK/scaler.yaml" --service lean \
  --recommend 0.9 >"$WORK/cfg-rec.out" 2>&1
check "with --config the other knobs are the config's" grep -q "its other knobs as in .*scaler.yaml" "$WORK/cfg-rec.out"
# --write-config: the config with the chosen knobs set on the service and every other byte kept;
# the written config replays as the choice did; it may rewrite --config in place; nothing is
# written when the choice misses the target on the held-out part.
# `replays CONFIG SERVICE REC.json`: tessera from CONFIG's SERVICE gives REC's chosen run.
replays() {
  "$TESSERA" sim autoscale --trace "$WORK/bursty.csv" --policy tessera --config "$1" \
    --service "$2" --json "$WORK/replay.json" >/dev/null || return 1
  python3 -c "
import json, sys
run = json.load(open(sys.argv[1]))['runs'][0]
chosen = json.load(open(sys.argv[2]))['recommendation']['chosen']
assert (run['gpu_hours'], run['slo_attainment']) == (chosen['gpu_hours'], chosen['slo_attainment']), (run, chosen)
" "$WORK/replay.json" "$3"
}
# `only_line_differs A B TEXT`: A and B differ in the one line of A holding TEXT.
only_line_differs() {
  python3 -c "
import sys
a, b = (open(p).read().split(chr(10)) for p in sys.argv[1:3])
diff = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
assert len(a) == len(b) and len(diff) == 1 and sys.argv[3] in a[diff[0]], (diff, a, b)
" "$@"
}
"$TESSERA" sim autoscale --trace "$WORK/bursty.csv" --policy tessera --config "$WORK/scaler.yaml" \
  --service defaults --recommend 0.98 --write-config "$WORK/tuned.yaml" --json "$WORK/tuned.json" \
  >"$WORK/tuned.out" 2>&1
check "--write-config exits 0" test $? = 0
check "saying what it set" grep -qE "^  wrote .*/tuned.yaml: .*/scaler.yaml, service defaults: .*scaleDownWindow 10m -> [0-9]+m" "$WORK/tuned.out"
check "in the service's own line of the flow map, the rest unchanged" only_line_differs "$WORK/scaler.yaml" "$WORK/tuned.yaml" "name: defaults"
check "the JSON names the file written" python3 -c "
import json, sys
assert json.load(open(sys.argv[1]))['recommendation']['written_config'] == sys.argv[2]" "$WORK/tuned.json" "$WORK/tuned.yaml"
check "the written config replays as the choice did" replays "$WORK/tuned.yaml" defaults "$WORK/tuned.json"
cp "$WORK/scaler.yaml" "$WORK/inplace.yaml"
"$TESSERA" sim autoscale --trace "$WORK/bursty.csv" --policy tessera --config "$WORK/inplace.yaml" \
  --service lean --recommend 0.6 --write-config "$WORK/inplace.yaml" --json "$WORK/inplace.json" \
  >"$WORK/inplace.out" 2>&1
check "in place: exits 0" test $? = 0
check "a block map's entry replaced, the rest unchanged" only_line_differs "$WORK/scaler.yaml" "$WORK/inplace.yaml" "targetUtilization: 0.9"
check "and it replays as the choice did" replays "$WORK/inplace.yaml" lean "$WORK/inplace.json"
"$TESSERA" sim autoscale --trace "$WORK/bursty.csv" --policy tessera --config "$WORK/scaler.yaml" \
  --service defaults --recommend 0.99 --holdout 1300s --write-config "$WORK/missed.yaml" \
  --json "$WORK/missed.json" >"$WORK/missed.out" 2>"$WORK/err"
check "a choice missing the target held out: exit 1" test $? = 1
check "saying why nothing was written" grep -qE 'write-config .*/missed.yaml: not written: the choice reaches [0-9.]+% on the held-out last 1300s, below the 99% asked' "$WORK/err"
check "and writing no config" test ! -e "$WORK/missed.yaml"
check "but the runs' JSON" python3 -c "
import json, sys
rec = json.load(open(sys.argv[1]))['recommendation']
assert rec['held_out']['chosen']['slo_attainment'] < 0.99 and 'written_config' not in rec, rec" "$WORK/missed.json"
# A config changed while the runs were simulated is not overwritten: the trace comes through a
# FIFO, whose writer's open returns once the command has read the config and opened the trace.
mkfifo "$WORK/trace.fifo"
cp "$WORK/scaler.yaml" "$WORK/racing.yaml"
"$TESSERA" sim autoscale --trace "$WORK/trace.fifo" --policy tessera --config "$WORK/racing.yaml" \
  --service lean --recommend 0.6 --write-config "$WORK/racing.yaml" >/dev/null 2>"$WORK/err" &
racing=$!
exec 3>"$WORK/trace.fifo"
echo "# edited by hand meanwhile" >>"$WORK/racing.yaml"
cat "$WORK/bursty.csv" >&3
exec 3>&-
wait "$racing"
check "a config changed meanwhile: exit 1" test $? = 1
check "saying so" grep -q "write-config .*/racing.yaml: not written: --config .*/racing.yaml changed while the runs were simulated (run again)" "$WORK/err"
check "and keeping the change" test "$(tail -1 "$WORK/racing.yaml")" = "# edited by hand meanwhile"
"$TESSERA" sim autoscale --trace "$WORK/bursty.csv" --recommend 0.99 --write-config "$WORK/x.yaml" 2>"$WORK/err" >/dev/null
check "--write-config needs --config" grep -q 'write-config: needs --recommend and --config' "$WORK/err"
"$TESSERA" sim autoscale --trace "$WORK/bursty.csv" --config "$WORK/scaler.yaml" --service lean \
  --write-config "$WORK/x.yaml" 2>"$WORK/err" >/dev/null
check "and --recommend" grep -q 'write-config: needs --recommend and --config' "$WORK/err"
"$TESSERA" sim autoscale --trace "$WORK/bursty.csv" --config "$WORK/scaler.yaml" --service lean \
  --recommend 0.6 --write-config "$WORK" 2>"$WORK/err" >"$WORK/dir.out"
check "a directory as --write-config is refused before the runs" grep -q -- "--write-config: $WORK: is a directory, expected a file" "$WORK/err"
check "  (no run printed)" test ! -s "$WORK/dir.out"
# A held-out part with no request in it (the client went quiet) is measured, with a warning.
printf '0,1,1,Gamma,1,1\r\n600,1,1,Gamma,1,1\r\n1200,1,1,Gamma,1,1\r\n1800,0,0,,0,0\r\n2400,0,0,,0,0\r\n3000,0,0,,0,0\r\n' >"$WORK/quiet.csv"
"$TESSERA" sim autoscale --trace "$WORK/quiet.csv" --format servegen --policy tessera \
  --recommend 0.9 --holdout 30m --json "$WORK/quiet.json" >/dev/null 2>"$WORK/err"
check "a quiet held-out part still exits 0" test $? = 0
check "warning that it measures GPU-hours only" grep -q 'warning: --holdout 30m: no request arrives in the last 30m of the replay: the held-out part measures GPU-hours only' "$WORK/err"
check "and its GPU-hours are measured" python3 -c "
import json, sys
h = json.load(open(sys.argv[1]))['recommendation']['held_out']
assert h['from_s'] == 1800 and h['chosen']['requests'] == 0 and h['base']['gpu_hours'] >= 0, h" "$WORK/quiet.json"
# --jobs: the runs on several threads are the runs one by one (the simulator's own CPU seconds
# aside), in the same order.
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --rate-scale 4 --policy tessera,keda-queue,fixed \
  --sweep --recommend 0.95 --jobs 1 --json "$WORK/jobs1.json" >"$WORK/jobs1.out"
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --rate-scale 4 --policy tessera,keda-queue,fixed \
  --sweep --recommend 0.95 --jobs 3 --json "$WORK/jobs3.json" >"$WORK/jobs3.out"
check "--jobs 3 prints what --jobs 1 does" cmp -s "$WORK/jobs1.out" "$WORK/jobs3.out"
check "and writes the same runs" python3 -c "
import json, sys
def strip(x):
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items() if k != 'cpu_seconds'}
    return [strip(v) for v in x] if isinstance(x, list) else x
a, b = (strip(json.load(open(p))) for p in sys.argv[1:3])
assert a == b and len(a['runs']) > 40, len(a['runs'])" "$WORK/jobs1.json" "$WORK/jobs3.json"
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --jobs -1 2>"$WORK/err" >/dev/null
check "a negative --jobs is refused" grep -q 'jobs -1: expected 0 (one per hardware thread) or more' "$WORK/err"
# A Prometheus outage: the header says it and the fallback, the JSON records both, and a
# static fallback of one replica costs SLO attainment that the shipped one does not, up to a
# minute after it (later, the backlog's replicas the static run started meet the burst at 5
# minutes: chance); bad spans and fallbacks are refused with the reason.
for fb in "replicas=1,behavior=static" "replicas=1,behavior=currentReplicasIfHigher"; do
  "$TESSERA" sim autoscale --trace "$WORK/trace.csv" --rate-scale 8 --policy tessera,hpa-cpu \
    --duration 4m --outage 60s+2m --keda-fallback "$fb,failureThreshold=1" \
    --json "$WORK/outage-${fb#*behavior=}.json" >"$WORK/outage.out" 2>&1
done
check "an outage run exits 0" test $? = 0
check "and says the outage and the fallback" grep -q "^Prometheus unreachable from 1m for 2m (tessera and keda-queue read it through KEDA; KEDA's fallback: replicas=1,behavior=currentReplicasIfHigher,failureThreshold=1)" "$WORK/outage.out"
check "the JSON records them, and the static fallback costs the SLO" python3 -c "
import json, sys
s = json.load(open('$WORK/outage-static.json'))
h = json.load(open('$WORK/outage-currentReplicasIfHigher.json'))
assert h['outages'] == [{'start_s': 60, 'length_s': 120}], h['outages']
assert s['keda_fallback'] == 'replicas=1,behavior=static,failureThreshold=1', s['keda_fallback']
t = lambda d, k: [r for r in d['runs'] if r['policy'] == k][0]
assert t(s, 'tessera')['slo_attainment'] < t(h, 'tessera')['slo_attainment'], (t(s, 'tessera'), t(h, 'tessera'))
assert t(s, 'hpa-cpu') == t(h, 'hpa-cpu')  # the metrics server has no outage"
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --outage 20s 2>"$WORK/err" >/dev/null
check "an outage without a length is refused" grep -q -- "--outage 20s: 20s: expected START+LENGTH from the replay's start, such as 30m+10m" "$WORK/err"
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --keda-fallback none 2>"$WORK/err" >/dev/null
check "a fallback without an outage is refused" grep -q -- '--keda-fallback: needs --outage' "$WORK/err"
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --outage 1m+1m --keda-fallback behavior=Static \
  2>"$WORK/err" >/dev/null
check "a behavior KEDA does not have is refused" grep -q -- '--keda-fallback behavior=Static: behavior=Static: expected static, currentReplicas' "$WORK/err"
# No scaler replica reachable: the header says it, the JSON records it, tessera's run changes
# and hpa-cpu's does not; a bad span is refused naming the flag.
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --rate-scale 8 --policy tessera,hpa-cpu \
  --duration 4m --json "$WORK/no-outage.json" >/dev/null 2>&1
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --rate-scale 8 --policy tessera,hpa-cpu \
  --duration 4m --scaler-outage 60s+2m --json "$WORK/scaler-outage.json" >"$WORK/so.out" 2>&1
check "a scaler outage run exits 0" test $? = 0
check "and says it" grep -q "^no tessera scaler replica reachable from 1m for 2m (KEDA's fallback never applies then, kedacore/keda#8056: HPA keeps the count, nothing wakes from zero)" "$WORK/so.out"
check "the JSON records it; only tessera's run changes" python3 -c "
import json
o = json.load(open('$WORK/scaler-outage.json'))
h = json.load(open('$WORK/no-outage.json'))
assert o['scaler_outages'] == [{'start_s': 60, 'length_s': 120}], o['scaler_outages']
assert 'outages' not in o
t = lambda d, k: [r for r in d['runs'] if r['policy'] == k][0]
assert t(o, 'hpa-cpu') == t(h, 'hpa-cpu')
assert t(o, 'tessera') != t(h, 'tessera')"
"$TESSERA" sim autoscale --trace "$WORK/trace.csv" --scaler-outage 1m 2>"$WORK/err" >/dev/null
check "a scaler outage without a length is refused" grep -q -- "--scaler-outage 1m: 1m: expected START+LENGTH" "$WORK/err"
finish sim_autoscale_test
