"""The Kubernetes side of kvwatch, UI-free.

`values` (what reads return and actions carry), `base` (the read and action interfaces, the
safety gate), `drain` (the drain, over those interfaces), `args` (vLLM engine args in container
specs), `plans` (pure: API objects -> plans and statuses), `kube/` (the official client: reads,
plans, apply), `sim/` (the demo's simulated cluster), `audit` (the action log), `facts` (what triage and
the runbook need from the cluster, gathered as data for the pure diagnosis). The metrics
Sources over a cluster live in `sources` (`kube`, `prom_kube`, `demo`) and reach it through a
protocol, never this package.
"""
