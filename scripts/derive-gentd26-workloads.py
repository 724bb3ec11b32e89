#!/usr/bin/env python3
"""Derives the diffusion-serving part of examples/workloads.yaml from Alibaba GenTD26.

GenTD26 (shared/data/alibaba-gentd26-pod-gpu) has per-pod GPU memory used (bytes) and GPU duty
cycle (%) of a production Stable Diffusion service, 57 s samples over 22.8 h; each pod holds a
whole GPU. For every pod in both files:
  - peak memory  = the pod's largest memory sample, plus 10% headroom, rounded up to 4 GiB
                   (what the pod must be guaranteed, as its own maximum shows);
  - peak compute = the pod's 99th-percentile duty cycle / 100, rounded up to 0.1, at least
                   0.1 (the share of GPU time it needs at its busiest minutes).
Pods with the same (memory, compute) are one workload with that many replicas, because one
Deployment's replicas share one pod template. Prints YAML list items for `workloads:`.

Usage: scripts/derive-gentd26-workloads.py ../shared/data/alibaba-gentd26-pod-gpu
"""
import collections
import csv
import math
import sys

GiB = 1 << 30


def main(folder):
    mem = collections.defaultdict(float)
    with open(f"{folder}/pod_gpu_memory_used_bytes_anon.csv") as f:
        for row in csv.DictReader(f):
            mem[row["container_ip"]] = max(mem[row["container_ip"]], float(row["value"]))
    duty = collections.defaultdict(list)
    with open(f"{folder}/pod_gpu_duty_cycle_anon.csv") as f:
        for row in csv.DictReader(f):
            duty[row["container_ip"]].append(float(row["value"]))
    pods = sorted(set(mem) & set(duty))
    classes = collections.Counter()
    for pod in pods:
        peak_gib = math.ceil(mem[pod] * 1.10 / GiB / 4) * 4
        samples = sorted(duty[pod])
        p99 = samples[min(len(samples) - 1, math.ceil(0.99 * len(samples)) - 1)]
        compute = max(0.1, math.ceil(p99 / 100 / 0.1 - 1e-9) * 0.1)
        classes[(peak_gib, round(compute, 2))] += 1
    print(f"  # {len(pods)} GenTD26 pods (Stable Diffusion serving), one whole GPU each today;")
    print(f"  # grouped into {len(classes)} workloads by (peak memory, p99 compute);"
          " scripts/derive-gentd26-workloads.py")
    for (gib, compute), n in sorted(classes.items()):
        name = f"sd-lora-m{gib}-c{int(round(compute * 100)):02d}"
        print(f"  - name: {name}\n    namespace: diffusion\n    replicas: {n}\n"
              f"    gpuMemory: {gib}Gi\n    gpuCompute: {compute:g}\n    isolation: memory")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "../shared/data/alibaba-gentd26-pod-gpu")
