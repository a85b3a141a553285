"""`kvwatch gpu`: sample this machine's GPUs once through the driver (NVML, else amdsmi)."""

from __future__ import annotations

import argparse


def register(sub) -> None:
    p = sub.add_parser(
        "gpu",
        help="show this machine's GPUs once (NVML, else amdsmi); exit 1 when there is none",
        description="One sample of the local GPUs: memory, utilisation, temperature, uncorrected "
        "ECC errors and active throttle reasons. Exit code 1 with one line when no GPU or driver is usable.",
    )
    p.set_defaults(func=run_gpu)


def run_gpu(args: argparse.Namespace) -> int:
    from tui.core.sources.gpu.local import gpu_check

    return gpu_check()
