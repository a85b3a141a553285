"""Room for one connection per replica under the open-files limit (`ulimit -n`).

A common soft limit is 1024; at that many replicas (each with its own kept-alive connection)
some scrapes fail with "Too many open files" while their replicas are healthy. The soft limit
may be raised up to the hard one without privileges, so kvwatch does that at start; when even
the hard limit is too low it says how many are needed instead of failing replicas quietly.
"""

from __future__ import annotations

OWN_FILES = 128  # kvwatch's own: stdio, the event loop, a recording, the GPU library, headroom


def make_room(connections: int) -> str | None:
    """Raise the soft open-files limit so `connections` fit beside kvwatch's own files; a line
    for the user when the hard limit does not allow it (None: there is room)."""
    try:
        import resource
    except ImportError:  # not a POSIX system: nothing to raise
        return None
    needed = connections + OWN_FILES
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return None
    target = needed if hard == resource.RLIM_INFINITY else min(hard, needed)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):
        target = soft
    if target >= needed:
        return None
    return (f"{connections} connections need about {needed} open files but the limit is {target} "
            f"(ulimit -n): some replicas will fail with 'Too many open files'; raise it with ulimit -n {needed}")
