"""`Cluster` over a real API server with the official `kubernetes` client.

One class assembled from one module per responsibility: `transport` (the client, its calls as
plain dicts in worker threads, construction from kubeconfig), `errors` (client failures ->
`ClusterError`), `reads` (pods, workloads, rollout status, logs, events, RBAC, contexts),
`watch` (the pod watch), `exec` (in-pod commands), `identity` (the authenticated user for the
audit log), `control` (owner chains, HPAs, routes and PodDisruptionBudgets), `planning` (reads
-> `ActionPlan`; the pure builders are in `..plans`), `apply` (a confirmed plan -> the API) and
`requests` (the exact requests behind a plan). Credentials come from
kubeconfig or the in-cluster service account only, and no message built here contains them.
"""

from __future__ import annotations

from .apply import JSON_PATCH, MERGE_PATCH, KubeApply
from .errors import map_error
from .exec import KubeExec
from .identity import KubeIdentity
from .planning import KubePlans
from .reads import KubeReads
from .watch import KubeWatch

__all__ = ["JSON_PATCH", "MERGE_PATCH", "KubeCluster", "map_error"]


class KubeCluster(KubeIdentity, KubeReads, KubeWatch, KubeExec, KubePlans, KubeApply):
    kind = "kubernetes"
