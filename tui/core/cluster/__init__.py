"""The Kubernetes side of kvwatch, UI-free.

`base` (the interface, results, safety gate, drain), `args` (vLLM engine args in container
specs), `plans` (API objects -> plans and statuses), `kube` (the official client), `sim` (the
demo's simulated cluster), `source` (a metrics Source over either), `audit` (the action log).
"""
