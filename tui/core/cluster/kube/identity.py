"""Who the API server says kvwatch is acting as: the audit log records the authenticated user
(SelfSubjectReview), not the name of the kubeconfig's user entry (often just `admin` or the
cluster's name, whatever credentials it holds).
"""

from __future__ import annotations

import asyncio
from typing import Any, AsyncGenerator

from ..values import ActionPlan, ActionResult, ClusterError, sanitize
from .transport import KubeTransport

# authentication.k8s.io/v1 SelfSubjectReview (GA in Kubernetes 1.28; `kubectl auth whoami`): POST, status.userInfo
SELF_SUBJECT_REVIEW = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}


class KubeIdentity(KubeTransport):
    """Resolves the authenticated identity once, before the first mutation is recorded."""

    _identity: str | None = None
    _identity_note: str = ""
    _identity_lock: asyncio.Lock | None = None

    async def whoami(self) -> str | None:
        """The authenticated username (cached); None when the API server cannot say (older than
        1.28, or RBAC denies the review): the audit log then names the kubeconfig entry."""
        if self._identity is not None or self._identity_note:
            return self._identity
        if self.readonly:  # the review is a `create`: under --readonly nothing but reads is sent
            return None
        if self._identity_lock is None:
            self._identity_lock = asyncio.Lock()
        async with self._identity_lock:
            if self._identity is None and not self._identity_note:
                from kubernetes import client

                try:
                    out = await self._call(client.AuthenticationV1Api(self.api).create_self_subject_review, dict(SELF_SUBJECT_REVIEW))
                except ClusterError as e:
                    if e.kind in ("not-found", "forbidden"):  # will not change in this session
                        self._identity_note = f"SelfSubjectReview: {e.message}"
                    return None
                name = ((out.get("status") or {}).get("userInfo") or {}).get("username")
                if name:
                    self._identity = sanitize(str(name))[:256]
                else:
                    self._identity_note = "SelfSubjectReview: no username"
        return self._identity

    def audit_user(self) -> dict[str, Any]:
        if self._identity:
            return {"user": self._identity, "user_source": "SelfSubjectReview", "kubeconfig_user": self.user}
        why = self._identity_note or ("not asked: read-only" if self.readonly else "identity not resolved")
        return {"user": self.user, "user_source": f"kubeconfig user entry ({why})", "kubeconfig_user": self.user}

    async def apply(self, plan: ActionPlan, *, typed_name: str | None = None) -> ActionResult:
        if not plan.errors:  # a refused plan sends nothing, not even the review
            await self.whoami()
        return await super().apply(plan, typed_name=typed_name)

    async def apply_confirmed(self, plan: ActionPlan) -> ActionResult:
        if not plan.errors:
            await self.whoami()
        return await super().apply_confirmed(plan)

    async def drain(self, plan: ActionPlan, load: Any, **kw: Any) -> AsyncGenerator[Any, None]:
        if not plan.errors:
            await self.whoami()
        inner = super().drain(plan, load, **kw)
        try:
            async for step in inner:
                yield step
        finally:
            await inner.aclose()  # its clean-up (back into rotation) runs now, not when garbage-collected
