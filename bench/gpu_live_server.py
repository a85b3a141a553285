"""A stand-in vLLM server for the live-mode GPU check (bench/gpu_live_check.sh).

Serves a real-size vLLM V1 page on 127.0.0.1:PORT and, in the same process (so kvwatch can
attribute the GPU to the PID listening on the port), keeps the GPU busy with bf16 matrix
products through PyTorch for --load seconds. Needs a CUDA GPU and PyTorch: device machines only.
"""

from __future__ import annotations

import argparse
import http.server
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from realpage import render_v1_page  # noqa: E402


def load(seconds: float, gib: int) -> None:
    try:
        import torch
    except ImportError:  # a dry run of the script on a machine without PyTorch
        print("no PyTorch: serving without a GPU load", flush=True)
        time.sleep(seconds)
        return
    hold = torch.empty(gib << 30, dtype=torch.uint8, device="cuda")  # memory the server "uses"
    a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(20):
            a = (a @ a).clamp_(-1, 1)
        torch.cuda.synchronize()
    del hold


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--load", type=float, default=40.0)
    p.add_argument("--gib", type=int, default=24)
    a = p.parse_args()
    lines = render_v1_page(kv_usage=0.42, running=37).splitlines()
    counters = [i for i, ln in enumerate(lines) if ln.startswith("vllm:") and "_total{" in ln]
    t0 = time.monotonic()

    def page_now() -> bytes:
        # Counters advance (tokens, requests) so the stand-in looks like a server at work, not a stall.
        out = list(lines)
        step = int((time.monotonic() - t0) * 400)
        for i in counters:
            name, _, v = out[i].rpartition(" ")
            out[i] = f"{name} {float(v) + step}"
        return ("\n".join(out) + "\n").encode()

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            page = page_now()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args: object) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", a.port), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    print(f"serving {len(page_now())} B on :{a.port}; GPU load for {a.load:.0f} s", flush=True)
    load(a.load, a.gib)
    time.sleep(5)  # a few scrapes after the load stops


if __name__ == "__main__":
    main()
