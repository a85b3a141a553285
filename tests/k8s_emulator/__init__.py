"""kmock's KubernetesEmulator, extended with the API-server and controller semantics kvwatch
relies on (see core.py). Tests import everything from here."""

from .common import (  # noqa: F401
    GPU_PENDING,
    HASH,
    KINDS,
    PLURAL,
    REVISION,
    WORKLOADS,
    Call,
    Fault,
    err,
    field_match,
    label_match,
    merge_patch,
    res,
    strategic_merge,
)
from .core import KubeEmulator  # noqa: F401
from .workloads import client_for, vllm_deployment, vllm_service, vllm_statefulset  # noqa: F401
