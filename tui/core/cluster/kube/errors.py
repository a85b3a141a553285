"""Client failures mapped to the one `ClusterError`, with a message meant for the SRE."""

from __future__ import annotations

import json
import re
import socket
from typing import Any, Mapping

from ..values import ClusterError, sanitize


# gopkg.in/evanphx/json-patch.v4 patch.go test(): errors.Wrapf(ErrTestFailed, "testing value %s failed", path), the wording
# the API server returns in its 422 for a failed JSON Patch `test` (a value kvwatch read has changed since)
_TEST_FAILED = re.compile(r"testing value (/\S*) failed")


def _status_message(body: Any) -> str:
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str) and body:
        try:
            data = json.loads(body)
            if isinstance(data, Mapping) and data.get("message"):
                return sanitize(str(data["message"]))[:500]
        except ValueError:
            return sanitize(body.strip().splitlines()[0])[:200] if body.strip() else ""
    return ""


def map_error(exc: BaseException, host: str = "") -> ClusterError:
    """Any failure of a client call -> a ClusterError with a message for the SRE."""
    from kubernetes.client.exceptions import ApiException
    from urllib3 import exceptions as u3

    if isinstance(exc, ClusterError):
        return exc
    if isinstance(exc, ApiException):
        status = exc.status or 0
        msg = _status_message(exc.body) or (exc.reason or "")
        if status == 401:
            return ClusterError("unauthorized", "unauthorized: the API server rejected the credentials (expired token?)", 401)
        if status == 403:
            return ClusterError("forbidden", f"forbidden: {msg or 'RBAC denies this'}", 403)
        if status == 404:
            return ClusterError("not-found", f"not found: {msg or 'no such object'}", 404)
        if status == 409:
            return ClusterError("conflict", f"conflict: {msg or 'the object was modified'}", 409)
        if status == 422:
            m = _TEST_FAILED.search(msg)
            if m:  # a precondition of the patch failed, not a 409: say which value changed
                return ClusterError("test-failed", f"{m.group(1)} is no longer the value read ({msg})", 422)
            return ClusterError("invalid", f"rejected: {msg or 'invalid request'}", 422)
        if status == 429:
            return ClusterError("server", "throttled by the API server (429); retry shortly", 429)
        if status >= 500:
            return ClusterError("server", f"API server error {status}: {msg or exc.reason or 'internal error'}", status)
        return ClusterError("error", f"API error {status}: {msg or exc.reason}", status or None)
    where = f" ({host})" if host else ""
    if isinstance(exc, u3.MaxRetryError):
        reason = exc.reason
        # NewConnectionError subclasses ConnectTimeoutError in urllib3 2: refused is not a timeout
        if isinstance(reason, u3.NewConnectionError):
            return ClusterError("unreachable", f"API server unreachable{where}")
        if isinstance(reason, (u3.ReadTimeoutError, u3.ConnectTimeoutError)):
            return ClusterError("timeout", f"API server timed out{where}")
        if isinstance(reason, u3.SSLError):
            return ClusterError("unreachable", f"TLS error talking to the API server{where}")
        return ClusterError("unreachable", f"API server unreachable{where}")
    if isinstance(exc, u3.NewConnectionError):
        return ClusterError("unreachable", f"API server unreachable{where}")
    if isinstance(exc, (u3.ReadTimeoutError, u3.ConnectTimeoutError, socket.timeout, TimeoutError)):
        return ClusterError("timeout", f"API server timed out{where}")
    if isinstance(exc, (u3.ProtocolError, u3.NewConnectionError, ConnectionError)):
        return ClusterError("unreachable", f"API server connection lost{where}")
    if isinstance(exc, u3.HTTPError):
        return ClusterError("unreachable", f"HTTP error talking to the API server{where}: {type(exc).__name__}")
    return ClusterError("error", f"unexpected error: {type(exc).__name__}: {sanitize(str(exc))[:200]}")
