"""Diagnosis: pure functions of a replica's history.

rules.diagnose      verdict + evidence per replica (used by Monitor on every refresh)
triage.triage       diagnostics.md steps 2-8 for one replica, as a structured report
runbook.runbook     the preemption-thrash flow, live, with the action that acts on each step
capacity.plan       KV capacity, max concurrency and a max-num-seqs that fits, with the arithmetic
context.ClusterFacts the cluster facts triage and the runbook read, gathered by cluster.facts
"""

from .rules import SUMMARY, classify, diagnose, export_state, import_state
from .thresholds import Thresholds

__all__ = ["SUMMARY", "Thresholds", "classify", "diagnose", "export_state", "import_state"]
