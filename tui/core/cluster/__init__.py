"""The Kubernetes side of kvwatch, UI-free.

`values` (what reads return and actions carry), `base` (the read and action interfaces, the
safety gate), `drain` (the drain, over those interfaces), `args/` (engine args in container
specs), `plans` and `pod_plans` (pure: API objects -> plans), `routes` (what sends traffic to a
pod and how to take it out of rotation), `rollout` (rollout status as kubectl computes it),
`kube/` (the official client: reads, plans, apply), `sim/` (the demo's simulated cluster),
`audit` (the action log), `facts` (what triage and the runbook need from the cluster, gathered
as data for the pure diagnosis). The metrics Sources over a cluster live in `sources` (`kube`,
`prom_kube`, `demo`) and reach it through a protocol, never this package.
"""
