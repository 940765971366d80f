"""Outbound request bookkeeping: correlation ids, one request in flight per destination,
request timeouts and retry backoff (Kafka's RequestManager).

A response is accepted only if it answers the request currently in flight to its source;
everything else (late, duplicated, from before a role change) is dropped, which is what
lets the core run over a network that reorders, duplicates and loses messages. Deadlines
are absolute ms; time comes from the caller. No I/O.
"""

from __future__ import annotations

from kraft.raft.effects import Send


class _InFlight:
    __slots__ = ("correlation_id", "sent_ms", "request")

    def __init__(self, correlation_id: int, sent_ms: int, request):
        self.correlation_id = correlation_id
        self.sent_ms = sent_ms
        self.request = request


class RequestTracker:
    def __init__(self, request_timeout_ms: int, retry_backoff_ms: int, first_correlation_id: int = 0):
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self._next_id = first_correlation_id
        self._in_flight: dict[int, _InFlight] = {}
        self._backoff_until: dict[int, int] = {}

    def next_correlation_id(self) -> int:
        cid = self._next_id
        self._next_id = (self._next_id + 1) & 0x7FFFFFFF
        return cid

    def is_ready(self, dest: int, now_ms: int) -> bool:
        """No request in flight (a timed-out one is dropped here) and not backing off."""
        f = self._in_flight.get(dest)
        if f is not None:
            if now_ms < f.sent_ms + self.request_timeout_ms:
                return False
            del self._in_flight[dest]
            self._backoff_until[dest] = f.sent_ms + self.request_timeout_ms + self.retry_backoff_ms
        until = self._backoff_until.get(dest)
        return until is None or now_ms >= until

    def has_in_flight(self, dest: int) -> bool:
        return dest in self._in_flight

    def ready_at(self, dest: int) -> int:
        """When ``dest`` may next be sent to (for the next deadline); 0 if now."""
        f = self._in_flight.get(dest)
        if f is not None:
            return f.sent_ms + self.request_timeout_ms
        return self._backoff_until.get(dest, 0)

    def on_sent(self, dest: int, correlation_id: int, request, now_ms: int) -> None:
        self._in_flight[dest] = _InFlight(correlation_id, now_ms, request)
        self._backoff_until.pop(dest, None)

    def expected(self, source: int, correlation_id: int):
        """The request this response answers, or None if it is not expected."""
        f = self._in_flight.get(source)
        if f is None or f.correlation_id != correlation_id:
            return None
        return f.request

    def on_result(self, source: int, correlation_id: int, success: bool, now_ms: int) -> None:
        f = self._in_flight.get(source)
        if f is None or f.correlation_id != correlation_id:
            return
        del self._in_flight[source]
        if not success:
            self._backoff_until[source] = now_ms + self.retry_backoff_ms

    def reset_all(self) -> None:
        """Forget every in-flight request (on a role change): their answers will be ignored."""
        self._in_flight.clear()
        self._backoff_until.clear()

    def reset(self, dest: int) -> None:
        self._in_flight.pop(dest, None)
        self._backoff_until.pop(dest, None)


class Outbox:
    """Sends requests as ``Send`` effects, recording each in the tracker."""

    def __init__(self, requests: RequestTracker, emit):
        self.requests = requests
        self._emit = emit

    def send(self, dest: int, request, now_ms: int, after_flushed: int = -1) -> None:
        cid = self.requests.next_correlation_id()
        self.requests.on_sent(dest, cid, request, now_ms)
        self._emit(Send(dest, cid, request, after_flushed))

    def send_if_ready(self, dest: int, build, now_ms: int, after_flushed: int = -1) -> int:
        """Send ``build()`` to ``dest`` if nothing is in flight there (not before the log is
        durable below ``after_flushed``); returns the time at which to look again."""
        if self.requests.is_ready(dest, now_ms):
            self.send(dest, build(), now_ms, after_flushed)
        return self.requests.ready_at(dest)
