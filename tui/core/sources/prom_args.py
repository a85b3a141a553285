"""The Prometheus mode's command-line flags, apart from the source itself: building the CLI
parser must not import the Prometheus client (httpx, ~45 ms) for modes that never use it."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of the Prometheus mode (the token is never a flag value: env var or file)."""
    g = parser.add_argument_group("Prometheus")
    g.add_argument("--prometheus", metavar="URL", help="read the fleet from this Prometheus-compatible API")
    g.add_argument("--match", metavar="SELECTOR", default=None,
                   help="label matchers selecting the vLLM series, e.g. '{namespace=\"inference\"}'")
    g.add_argument("--prom-token-env", metavar="VAR", default=None, help="bearer token from this environment variable")
    g.add_argument("--prom-token-file", metavar="PATH", default=None, help="bearer token from this file (re-read when it changes)")
    g.add_argument("--prom-ca", metavar="FILE", default=None, help="CA bundle (PEM) to verify the server's certificate")
    g.add_argument("--prom-insecure", action="store_true", help="skip TLS certificate verification")
    g.add_argument("--prom-timeout", metavar="SECONDS", type=float, default=10.0,
                   help="per-query deadline, the whole answer included (default 10)")
    g.add_argument("--prom-max-mib", metavar="MIB", type=float, default=64.0,
                   help="refuse a query answer larger than this (default 64 MiB; twice that for all in flight)")
    g.add_argument("--prom-rate-window", metavar="SECONDS", type=float, default=60.0,
                   help="window of server-side rate() and quantiles; at least 2 scrape intervals (default 60)")
    g.add_argument("--gpu-match", metavar="SELECTOR", default=None,
                   help="label matchers for DCGM/AMD exporter series (default: all)")
    g.add_argument("--no-gpu", action="store_true", help="do not query GPU exporter series")
