"""`Cluster` over the simulated fleet, so every key works in `kvwatch demo`.

Each simulator group is a Deployment whose pods are the group's replicas. The same plan builders
as the real adapter make the diffs and patches (from a synthetic pod template), the same safety
gate and audit log apply, and actions really change the simulation: an args edit rolls replicas
one at a time with the new args (a new replica loads for minutes of simulated time, then the old
one leaves rotation, drains and goes), so the simulator's preemptions really fall; a drain moves
load to the spare; roll back restores the previous args.

Time: `now()` is the simulator clock. When the fleet runs in its own thread, `sleep()` waits
real time; when it is stepped (tests, tools), `sleep()` steps the simulation instead.
"""

from __future__ import annotations

from .apply import SimApply
from .planning import SimPlans
from .reads import SimReads
from .state import PROGRESS_DEADLINE_S

__all__ = ["PROGRESS_DEADLINE_S", "SimCluster"]


class SimCluster(SimReads, SimPlans, SimApply):
    kind = "simulated"
