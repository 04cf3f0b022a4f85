"""The client's errors: the API's error codes, and the client's own."""

from typing import Any, Optional


class RatchetError(Exception):
    """What Ratchet answered, or what the client decided.

    ``code`` is the API's ``error`` (``not-found``, ``malformed-request``,
    ``unauthorized``, ``cursor-expired``, ``not-recorded``, …) or the client's
    own: ``timeout`` (``wait_for`` ran out of time), ``unreachable`` (the job
    ended in another state than the one awaited), ``polling-stopped``
    (reconcile stopped polling the open job for good), ``network``,
    ``unexpected-response``, ``invalid-url``, ``invalid-argument`` and
    ``missing-dependency`` (``AsyncRatchetClient`` without ``httpx``).
    ``status`` is the HTTP status when the API answered; ``operation`` the
    record as last read, for ``timeout``, ``unreachable``, ``not-found`` and
    ``polling-stopped``.
    """

    def __init__(self, code: str, message: str, status: Optional[int] = None, operation: Optional[Any] = None) -> None:
        super().__init__(message)
        self.code = code
        self.status = status
        self.operation = operation
        self.oldest_cursor: Optional[str] = None
        """A ``cursor-expired`` answer's oldest cursor still good."""

    def __repr__(self) -> str:
        return f"RatchetError({self.code!r}, {str(self)!r}, status={self.status!r})"


class EffectVerificationError(Exception):
    """An effect that is not Ratchet's, as sent: ``code`` is ``missing-secret``,
    ``missing-headers``, ``bad-signature``, ``stale-timestamp`` or ``malformed-body``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
