"""The one error a local GPU sampler raises: str(e) is a single line for the user."""


class GpuUnavailable(Exception):
    """No usable GPU library, driver or device; the message says which, in one line."""
