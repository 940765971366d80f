"""Client quota enforcement on a broker listener (Kafka's KIP-219 throttling, Kafka >= 2.0):
wraps the broker's request handlers; the arithmetic is ``kraft.broker.quotas``.

For a request whose (user principal, client id) maps to a quota: Produce records the bytes of
its record batches (``producer_byte_rate``; Kafka records the request size, which the batches
make up but for a few header bytes), Fetch from a consumer the bytes of its answer
(``consumer_byte_rate``), every request the time its handler ran (``request_percentage``:
percent of one thread, Kafka's ClientRequestQuotaManager). The answer is sent at once
carrying ``throttle_time_ms`` (the larger of the byte and request throttles), and the
connection is muted (no request read) for that long (``RequestContext.mute_for``), so a
client that ignores the throttle time is held anyway.

``controller_mutation_rate`` is applied here, before CreateTopics / CreatePartitions /
DeleteTopics are forwarded: kraft forwards the request itself (no Envelope), so the controller
would see this broker's identity, not the client's. Topics refused by a strict quota are
answered THROTTLING_QUOTA_EXCEEDED here and the rest forwarded; the answers are merged in
request order. A request with no quota costs one dict
lookup; with no quotas in the image, one attribute test.
"""

from __future__ import annotations

import asyncio
import struct
import time

from kraft.broker.quotas import FETCH, MUTATION, PRODUCE, REQUEST, ClientQuotas
from kraft.controller.topic_handlers import ERROR_RESPONSES as TOPIC_ERRORS
from kraft.errors import ErrorCode
from kraft.protocol import EncodedBody, EncodedParts, FetchRequest, ProduceRequest, ProduceResponse, Response
from kraft.server.reply import Reply, relay

_I32 = struct.Struct(">i")
#: Kafka exempts the requests a client needs to learn about throttling and to authenticate
_EXEMPT = frozenset({17, 18, 36})
_NS_TO_PERCENT = 100.0 / 1e9  # ClientRequestQuotaManager.NanosToPercentagePerSecond
#: CreateTopics, DeleteTopics, CreatePartitions: the version from which the quota is strict
STRICT_SINCE = {19: 6, 20: 5, 37: 3}
THROTTLED = "The throttling quota has been exceeded."


def _user(principal: str) -> str:
    return principal.split(":", 1)[1] if ":" in principal else principal


def _records_bytes(request) -> int:
    return sum(len(p.records or b"") for t in request.topic_data for p in t.partition_data)


def with_throttle(response, ms: int, version: int):
    """``response`` carrying ``throttle_time_ms = ms`` (at versions that have the field)."""
    if response is None or ms <= 0:
        return response
    kind = type(response)
    if kind is EncodedParts:  # a Fetch answer (v1+): the body starts with ThrottleTimeMs
        if version >= 1:
            first = bytes(response[0])
            return EncodedParts([_I32.pack(ms) + first[4:], *response[1:]])
        return response
    if kind is EncodedBody:  # a Produce answer spliced from a cached encoding: rebuilt (rare: throttled)
        response, _ = ProduceResponse.decode_from(memoryview(response), 0, version)
    # Produce and Fetch v0 have no such field (ignorable there): the mute alone throttles them.
    if isinstance(response, Response) and hasattr(response, "throttle_time_ms"):
        response.throttle_time_ms = max(response.throttle_time_ms or 0, ms)
    return response


def _fetch_bytes(response) -> int:
    if type(response) is EncodedParts:
        return response.nbytes
    try:
        return sum(len(p.records or b"") for t in response.responses for p in t.partitions)
    except AttributeError:
        return 0


class QuotaThrottledHandlers:
    def __init__(self, inner, state, quotas: ClientQuotas | None = None, clock_ms=None):
        self.inner = inner
        self.state = state
        self.quotas = quotas or ClientQuotas()
        self.clock_ms = clock_ms or (lambda: int(time.monotonic() * 1000))

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def handle(self, ctx, request):
        entities = self.state.image.client_quotas.entities
        if not entities or request.API_KEY in _EXEMPT:
            return self.inner.handle(ctx, request)
        q = self.quotas
        user, client_id = _user(ctx.principal), ctx.header.client_id or ""
        now = self.clock_ms()
        throttle = 0
        kind = type(request)
        if kind is ProduceRequest:
            throttle = q.record(entities, PRODUCE, user, client_id, _records_bytes(request), now)
        elif request.API_KEY in STRICT_SINCE and q.quota(entities, MUTATION, user, client_id)[1] is not None:
            return self._mutation(ctx, request, entities, user, client_id, now)
        fetch_quota = (kind is FetchRequest and self._consumer(request, ctx)
                       and q.quota(entities, FETCH, user, client_id)[1] is not None)
        request_quota = q.quota(entities, REQUEST, user, client_id)[1] is not None
        started = time.perf_counter_ns() if request_quota else 0
        result = self.inner.handle(ctx, request)
        if request_quota:
            elapsed = (time.perf_counter_ns() - started) * _NS_TO_PERCENT
            throttle = max(throttle, q.record(entities, REQUEST, user, client_id, elapsed, now))
        version = ctx.header.api_version
        if not fetch_quota:
            return self._throttled(ctx, result, throttle, version)
        if asyncio.iscoroutine(result):
            result = asyncio.ensure_future(result)
        if isinstance(result, (Response, EncodedParts)):
            return self._fetched(ctx, result, throttle, entities, user, client_id, version)
        out = Reply(lambda resp: self._fetched(ctx, resp, throttle, entities, user, client_id, version))
        result.add_done_callback(lambda f: relay(f, out))
        return out

    # --- controller_mutation_rate ---------------------------------------------------------
    def _topics(self, request, version: int) -> tuple[list, list, str]:
        """(the request's topic entries, the partitions each mutates, their field name)."""
        image = self.state.image
        key = request.API_KEY
        if key == 19:
            default = int(getattr(self.inner, "static_configs", {}).get("num.partitions", 1))
            return request.topics, [len(t.assignments) if t.assignments else
                                    (t.num_partitions if t.num_partitions > 0 else default)
                                    for t in request.topics], "topics"
        if key == 37:
            by_name = image.topics.by_name
            return request.topics, [max(0, t.count - len(by_name[t.name].partitions)) if t.name in by_name else 0
                                    for t in request.topics], "topics"
        field = "topics" if version >= 6 else "topic_names"
        entries = getattr(request, field)
        names = [e.name if version >= 6 else e for e in entries]
        by_name = image.topics.by_name
        return entries, [len(by_name[n].partitions) if n in by_name else 0 for n in names], field

    def _mutation(self, ctx, request, entities, user: str, client_id: str, now: int):
        version = ctx.header.api_version
        key = request.API_KEY
        entries, permits, field = self._topics(request, version)
        accepted, ms = self.quotas.mutate(entities, user, client_id, permits, version >= STRICT_SINCE[key], now)
        refused = [e for e, ok in zip(entries, accepted) if not ok]
        if not refused:
            return self._throttled(ctx, self.inner.handle(ctx, request), ms, version)
        refusals = TOPIC_ERRORS[key](_with_field(request, field, refused), version,
                                     ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED)
        kept = [e for e, ok in zip(entries, accepted) if ok]
        if not kept:
            return self._throttled(ctx, refusals, ms, version)
        forwarded = self.inner.handle(ctx, _with_field(request, field, kept))
        return self._throttled(ctx, _merged(forwarded, refusals, accepted), ms, version)

    @staticmethod
    def _consumer(request, ctx) -> bool:
        replica = request.replica_state.replica_id if ctx.header.api_version >= 15 else request.replica_id
        return replica < 0  # followers' fetches are replication, not client traffic

    def _fetched(self, ctx, response, throttle, entities, user, client_id, version):
        ms = self.quotas.record(entities, FETCH, user, client_id, _fetch_bytes(response), self.clock_ms())
        return self._throttled(ctx, response, max(throttle, ms), version)

    @staticmethod
    def _throttled(ctx, result, ms: int, version: int):
        """``result`` with the throttle time; the connection muted once the answer is ready
        (Kafka mutes it when the answer is sent: a produce waiting for acks=all is not
        counted as throttled time)."""
        if ms <= 0:
            return result
        def throttled(response):
            if ctx.mute_for is not None:
                ctx.mute_for(ms)
            return with_throttle(response, ms, version)
        if isinstance(result, (Response, EncodedParts, EncodedBody)) or result is None:
            return throttled(result)
        # An answer still to come (acks=all, forwarding): dispatch nothing more from this
        # connection from now, not only once it is ready. kraft reads ahead (several requests
        # of a connection in flight) where Kafka reads one at a time, and the frames queued
        # meanwhile would otherwise all pass before the mute. The mute is taken again from the
        # answer's time, as Kafka counts it.
        if ctx.mute_for is not None:
            ctx.mute_for(ms)
        if asyncio.iscoroutine(result):
            result = asyncio.ensure_future(result)
        out = Reply(throttled)
        result.add_done_callback(lambda f: relay(f, out))
        return out


def _with_field(request, field: str, value):
    """A copy of ``request`` with one list field replaced (the other fields shared)."""
    copy = type(request).__new__(type(request))
    for f in type(request).FIELDS:
        setattr(copy, f.name, getattr(request, f.name, None))
    copy.unknown_tagged_fields = getattr(request, "unknown_tagged_fields", None)
    setattr(copy, field, value)
    return copy


_RESULTS = {19: "topics", 20: "responses", 37: "results"}


async def _merged(forwarded, refusals, accepted: list):
    """The controller's answer for the kept topics with the refused ones, in request order."""
    response = await forwarded if not isinstance(forwarded, Response) else forwarded
    field = _RESULTS[response.API_KEY]
    done, refused = iter(getattr(response, field)), iter(getattr(refusals, field))
    setattr(response, field, [next(done) if ok else next(refused) for ok in accepted])
    return response
