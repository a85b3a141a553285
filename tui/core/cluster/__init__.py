"""The Kubernetes side of kvwatch, UI-free.

`base` (the interface, results, safety gate, drain), `args` (vLLM engine args in container
specs), `plans` (API objects -> plans and statuses), `kube` (the official client), `sim` (the
demo's simulated cluster), `audit` (the action log), `facts` (what triage and the runbook need
from the cluster, gathered as data for the pure diagnosis). The metrics Sources over a cluster
live in `sources` (`kube`, `prom_kube`, `demo`) and reach it through a protocol, never this
package.
"""
