"""Prometheus alerting and recording rules from kvwatch's own thresholds (`kvwatch rules`)."""

from .generate import ALERTS, RuleOptions, build_groups, validate
from .render import FORMATS, render

__all__ = ["ALERTS", "FORMATS", "RuleOptions", "build_groups", "render", "validate"]
