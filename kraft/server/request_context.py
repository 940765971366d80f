"""What a request handler behind a listener sees and may return (``kraft.server.network``
serves it): the request's context, the handler and admission-gate contracts, and an answer
carrying only an error code. No sockets."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Protocol, Union

from kraft.protocol import RequestHeader, Response, response_class

ANONYMOUS = "User:ANONYMOUS"


@dataclass(slots=True)  # one per request: no __dict__ to make
class RequestContext:
    header: RequestHeader
    listener: str
    peer: str  # "host:port" of the client
    received_ns: int
    #: who sent it: ``User:ANONYMOUS`` on PLAINTEXT, the certificate subject on mTLS (Kafka's
    #: KafkaPrincipal text), for the authorizer to check
    principal: str = ANONYMOUS
    #: ``mute_for(ms)``: read no more requests from this connection for ``ms`` (KIP-219
    #: quota throttling; answers already owed still leave)
    mute_for: Any = None
    #: ``(topic) -> bool``, set by the authorizer for a ConsumerGroupHeartbeat: the topics the
    #: principal may DESCRIBE, for its regex subscription (None: every topic)
    may_describe_topic: Any = None


class RequestHandler(Protocol):
    def handle(self, ctx: RequestContext, request) -> Union[Response, Awaitable[Response], None]:
        """Return the response, an awaitable of it, or None to send nothing."""


class AdmissionGate(Protocol):
    """What the handler behind a listener may hold back (the controller's queue when full)."""

    def holds(self, api_key: int) -> bool:
        """True: a request of ``api_key`` must not be read now."""

    def wait(self, resume) -> None:
        """Call ``resume()`` once requests may be read again."""


def error_response(api_key: int, version: int, code: int) -> Response | None:
    """A response carrying ``code`` at top level, if that response type has one in ``version``."""
    cls = response_class(api_key)
    names = {f.name for f in cls.FIELDS if version in f.versions}
    if "error_code" not in names:
        return None
    return cls(error_code=int(code))
