"""What the NVML and amdsmi samplers share: open once, read fields that may fail, close."""

from __future__ import annotations

from typing import Any, Self


class LibrarySampler:
    """Subclasses set `SHUTDOWN` (the library's shutdown call) and implement `open()`."""

    SHUTDOWN = ""

    def __init__(self, lib: Any | None = None) -> None:
        self._lib_arg = lib  # an injected library (recorded values in tests); None: import it
        self._lib: Any = None

    def open(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        if self._lib is None:
            return
        try:
            getattr(self._lib, self.SHUTDOWN)()
        except Exception:  # noqa: BLE001 - shutting down: nothing useful to say
            pass
        self._lib = None

    def __enter__(self) -> Self:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _field_error(self) -> type[BaseException] | tuple[type[BaseException], ...]:
        return Exception

    def _get(self, fn: str, *args: Any) -> Any:
        """One field; None when the call is missing, unsupported or fails for this GPU, so one
        unsupported field never hides the others."""
        f = getattr(self._lib, fn, None)
        if f is None:
            return None
        try:
            return f(*args)
        except self._field_error():
            return None
