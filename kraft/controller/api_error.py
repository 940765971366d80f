"""``ApiError``: a refusal with a Kafka error code and message, as Kafka's ``ApiError``.

Handlers raise it (or a :class:`kraft.errors.KraftError` subclass) where a request is refused
and turn it into the response's error fields; it never escapes a handler. This module must not
know about any request.
"""

from __future__ import annotations

from kraft.errors import ErrorCode, KraftError


class ApiError(KraftError):
    def __init__(self, code: ErrorCode, message: str | None = None):
        super().__init__(message or code.name)
        self.code = ErrorCode(code)
        self.message = message

    @classmethod
    def of(cls, error: KraftError) -> "ApiError":
        """Any kraft error as an ApiError carrying its code and text."""
        if isinstance(error, ApiError):
            return error
        return cls(ErrorCode(error.code), str(error) or None)
