#!/usr/bin/env bash
# Live-mode GPU check (issue 12) on a machine with an NVIDIA GPU and PyTorch: kvwatch --url on a
# local stand-in server that keeps the GPU busy, GPUs read by kvwatch's own NVML sampler.
# Usage: bash bench/gpu_live_check.sh [OUTDIR]   (run from the repository root)
set -u
OUT=${1:-/tmp/gpu-check}; mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
PY=${PY:-python3}
kv() { "$PY" -c 'import sys; from tui.cli import main; sys.exit(main(sys.argv[1:]))' "$@"; }
echo "== machine"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
"$PY" -c 'import pynvml, sys; print("python", sys.version.split()[0], "nvidia-ml-py", getattr(pynvml, "__version__", "?"))'
echo "== kvwatch gpu (idle)"; kv gpu
echo "== NvmlSampler cost"
"$PY" - <<'PY'
import time
from tui.core.sources.gpu.nvml import NvmlSampler
s = NvmlSampler(); s.open(); s.sample()
n = 200; t = time.perf_counter()
for _ in range(n): s.sample()
print(f"NvmlSampler.sample: {(time.perf_counter()-t)/n*1e3:.3f} ms per sample ({n} samples, {len(s.devices())} GPU)")
t = time.perf_counter()
for _ in range(n): s.compute_pids()
print(f"NvmlSampler.compute_pids: {(time.perf_counter()-t)/n*1e3:.3f} ms per call")
s.close()
PY
echo "== live mode under load"
"$PY" bench/gpu_live_server.py --port 8000 --load 35 --gib 24 > "$OUT/server.log" 2>&1 &
SRV=$!
for _ in $(seq 50); do "$PY" -c 'import socket; socket.create_connection(("127.0.0.1", 8000), 0.2)' 2>/dev/null && break; sleep 0.2; done
sleep 8  # let CUDA start and the load begin
kv --url 127.0.0.1:8000 --json --duration 30 > "$OUT/live.jsonl" 2> "$OUT/live.err"
echo "kvwatch exit $?; stderr:"; cat "$OUT/live.err"
echo "== kvwatch gpu (under load)"; kv gpu
wait $SRV; cat "$OUT/server.log"
"$PY" - "$OUT/live.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(f"{len(rows)} refreshes; source: {rows[0]['source'] if rows else '-'}")
for i, r in enumerate(rows):
    if i % 5 and i != len(rows) - 1:
        continue
    x = r["replicas"][0]
    gpu = [e["text"] for e in x["evidence"] if any(k in (e["signal"] + e["text"]).lower() for k in ("gpu", "throttl", "xid", "ecc", "clock", "power"))]
    print(f"t+{r['ts']-rows[0]['ts']:5.1f}s {x['verdict']:10} gpu_mem {x['gpu_memory_pct']} util {x['gpu_util_pct']} | " + "; ".join(gpu))
PY
