"""``ApiError``: a request-level failure a handler answers with a Kafka error code and message
(Kafka's ``ApiException`` subclasses in one type; the code says which)."""

from __future__ import annotations

from kraft.errors import ErrorCode, KraftError


class ApiError(KraftError):
    def __init__(self, code: ErrorCode, message: str | None = None):
        super().__init__(message or code.name)
        self.code = ErrorCode(code)
        self.message = message
