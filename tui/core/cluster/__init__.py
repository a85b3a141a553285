"""The Kubernetes side of kvwatch, UI-free.

`values` (what reads return and actions carry), `base` (the read and action interfaces, the
safety gate), `drain` (the drain, over those interfaces), `args` (vLLM engine args in container
specs), `plans` (pure: API objects -> plans and statuses), `kube/` (the official client: reads,
plans, apply), `sim/` (the demo's simulated cluster), `source` (a metrics Source over either),
`audit` (the action log).
"""
