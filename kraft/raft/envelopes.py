"""The envelopes in which messages reach the Raft core: who sent them and how to answer.

The messages themselves are Kafka's protocol objects (``kraft.raft.rpcs``). An
:class:`InboundRequest` carries an opaque ``handle`` that the core returns in a ``Respond``
effect, possibly much later (long-poll Fetch); an :class:`InboundResponse` carries the
``correlation_id`` of the ``Send`` it answers; :class:`RequestFailed` says a ``Send`` got no
answer. Plain values: nothing here does I/O or validation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class InboundRequest:
    """A request; answer it with ``Respond(handle, response)``. ``source`` is the sender's
    node id when the transport knows it (the simulator does), else -1: the core reads who
    asks from the request itself (Fetch's ReplicaId, Vote's candidate, ...)."""

    source: int
    body: Any
    handle: Any = None


@dataclass(frozen=True, slots=True)
class InboundResponse:
    """The answer to our ``Send`` with ``correlation_id``. Late, duplicated or unexpected
    responses are fine: the core ignores any it is no longer waiting for."""

    source: int
    correlation_id: int
    body: Any


@dataclass(frozen=True, slots=True)
class RequestFailed:
    """The transport could not deliver request ``correlation_id`` to ``destination`` (or the
    connection broke). Optional: the core also times requests out on its own.
    ``peer_gone``: the connection was closed, reset or refused by the peer (not a timeout)."""

    destination: int
    correlation_id: int
    peer_gone: bool = False
