#!/usr/bin/env python3
"""One MPS client's view of the GPU, as the share Tessera's extender annotated would run.

Prints one JSON line: the memory CUDA reports (free/total MiB), the SM count the client sees,
whether allocations of the given sizes succeed, and bf16 matrix-product throughput for a fixed
time from a common start (so that concurrent clients overlap).

usage: mps_probe.py LABEL ALLOC_MIB[,ALLOC_MIB...] START_EPOCH_S SECONDS
"""
import json
import sys
import time

import torch


def main():
    label, sizes, start, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
    r = {"label": label}
    free, total = torch.cuda.mem_get_info()
    r["free_mib"], r["total_mib"] = free >> 20, total >> 20
    p = torch.cuda.get_device_properties(0)
    r["name"], r["sms"] = p.name, p.multi_processor_count
    r["alloc"] = {}
    for mib in (int(s) for s in sizes.split(",") if s):
        try:
            t = torch.empty(mib << 20, dtype=torch.uint8, device="cuda")
            t.fill_(1)
            torch.cuda.synchronize()
            del t
            r["alloc"][str(mib)] = "ok"
        except torch.OutOfMemoryError as e:
            r["alloc"][str(mib)] = "out of memory: " + str(e).split("\n")[0][:160]
        torch.cuda.empty_cache()
    n = 8192
    a = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    while time.time() < start:
        time.sleep(0.001)
    t0 = time.perf_counter()
    done = 0
    while time.perf_counter() - t0 < seconds:
        for _ in range(10):
            a @ b
        torch.cuda.synchronize()
        done += 10
    dt = time.perf_counter() - t0
    r["products"], r["seconds"] = done, round(dt, 3)
    r["tflops"] = round(2 * n**3 * done / dt / 1e12, 1)
    print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
