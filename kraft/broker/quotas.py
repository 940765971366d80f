"""Client quotas on a broker: Kafka's ``ClientQuotaManager`` with its default quota callback,
as pure arithmetic over an injected clock (``now_ms``) — no I/O, no timers.

* **Which quota applies** (``resolve``): for a request from user principal ``u`` with client
  id ``c``, the first entity holding the quota's key among user+client, user+default-client,
  user, default-user+client, default-user+default-client, default-user, client,
  default-client. It yields the quota and the sensor's key (Kafka's metric tags): (u, c) for
  the user+client kinds, (u, "") for the user kinds, ("", c) for the client kinds, so every
  connection mapped to one entity shares one sensor (``--entity-name flood`` is shared by all
  of flood's connections; a default quota gives each user or client id its own sensor).
* **Rate** (``Rate``): Kafka's ``Rate`` over a ``SampledStat`` of ``quota.window.num``
  samples (11) of ``quota.window.size.seconds`` (1 s): the sum of the live samples over the
  elapsed time since the oldest one, counted as at least ``samples - 1`` full windows.
* **Throttle** (``throttle_ms``): Kafka's ``QuotaUtils.throttleTime``: after recording, a
  rate above the bound gives ``round((rate - bound) / bound * window_ms)``, the time the
  average needs to fall back to the bound, capped at one window for request_percentage
  (``ClientRequestQuotaManager``).
* **Byte rates** (``producer_byte_rate``, ``consumer_byte_rate``) are the exception: kraft
  holds them with the KIP-599 token bucket below (``samples * window`` seconds of the quota,
  full at first, the throttle the time to refill to zero) instead of the Rate. The Rate lets a
  flood through in bursts: a client held down for ~10 s has its samples purged together and
  the next ~10 s of quota passes at once, so a flooding producer measured over any 30 s swung
  between +1% and +16% of a 1 MiB/s quota (bench/bench_quotas.py). Kafka moved controller
  mutations to the token bucket for this reason (KIP-599); the first burst is the same.
* **Controller mutations** (``TokenBucket``, ``ClientQuotas.mutate``): Kafka's KIP-599 token
  bucket of ``samples * window`` seconds of ``controller_mutation_rate`` partitions, full at
  first; a strict request (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+) is refused
  per topic while the bucket is below zero, an older one is recorded and only throttled;
  the throttle is ``round(-tokens / rate * 1000)`` ms.

The I/O side (recording sizes, patching ``throttle_time_ms``, muting the connection) is
``kraft.server.quota_throttle``.
"""

from __future__ import annotations

PRODUCE, FETCH, REQUEST = "producer_byte_rate", "consumer_byte_rate", "request_percentage"
MUTATION = "controller_mutation_rate"
DEFAULT_SAMPLES, DEFAULT_WINDOW_MS = 11, 1000
#: Kafka's sensors expire after an hour without records (inactiveSensorExpirationTimeSeconds)
SENSOR_EXPIRY_MS = 3_600_000
_CHECK_EXPIRY_EVERY = 10_000


def _entity(user=..., client=...) -> tuple:
    """An image key (``kraft.metadata.client_quotas``: pairs sorted by type); ``...`` omits a
    type, None is its default entity."""
    pairs = []
    if client is not ...:
        pairs.append(("client-id", client))
    if user is not ...:
        pairs.append(("user", user))
    return tuple(pairs)


def resolve(entities: dict, key: str, user: str, client_id: str) -> tuple[tuple[str, str], float | None]:
    """(sensor key, quota or None) for ``key`` (Kafka's quotaMetricTags + quotaLimit)."""
    u, c = user, client_id
    for entity, tags in (
            (_entity(u, c), (u, c)), (_entity(u, None), (u, c)), (_entity(u), (u, "")),
            (_entity(None, c), (u, c)), (_entity(None, None), (u, c)), (_entity(None), (u, "")),
            (_entity(client=c), ("", c)), (_entity(client=None), ("", c))):
        quotas = entities.get(entity)
        if quotas is not None and key in quotas:
            return tags, quotas[key]
    return ("", c), None


class Rate:
    """Kafka's ``Rate`` (per second) over a ``SampledStat``: a ring of ``samples + 1`` samples
    ``[start_ms, last_event_ms, value]``; a sample is complete ``window_ms`` after its start,
    and one whose last event is ``samples * window_ms`` old is reset (purged)."""

    __slots__ = ("samples", "window_ms", "ring", "current")

    def __init__(self, samples: int = DEFAULT_SAMPLES, window_ms: int = DEFAULT_WINDOW_MS):
        self.samples, self.window_ms = samples, window_ms
        self.ring: list[list] = []
        self.current = 0

    def _current(self, now_ms: int) -> list:
        if not self.ring:
            self.ring.append([now_ms, now_ms, 0.0])
        return self.ring[self.current]

    def record(self, value: float, now_ms: int) -> None:
        sample = self._current(now_ms)
        if now_ms - sample[0] >= self.window_ms:  # complete: advance (Kafka's SampledStat.advance)
            self.current = (self.current + 1) % (self.samples + 1)
            if self.current >= len(self.ring):
                sample = [now_ms, now_ms, 0.0]
                self.ring.append(sample)
            else:
                sample = self.ring[self.current]
                sample[:] = [now_ms, now_ms, 0.0]
        sample[2] += value
        sample[1] = now_ms

    def _purge(self, now_ms: int) -> None:
        expire = self.samples * self.window_ms
        for sample in self.ring:
            if now_ms - sample[1] >= expire:
                sample[:] = [now_ms, now_ms, 0.0]

    def window_ms_at(self, now_ms: int) -> int:
        """Kafka's ``Rate.windowSize``: elapsed time since the oldest live sample, at least
        ``samples - 1`` full windows, at least 1 ms."""
        self._purge(now_ms)
        oldest = min(s[0] for s in self.ring) if self.ring else now_ms
        elapsed = now_ms - oldest
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def measure(self, now_ms: int) -> float:
        """The rate per second at ``now_ms``."""
        window = self.window_ms_at(now_ms)  # purges first, as Kafka's measure does
        return sum(s[2] for s in self.ring) / (window / 1000.0)


def throttle_ms(rate: float, bound: float, window_ms: int) -> int:
    """Kafka's ``QuotaUtils.throttleTime``: 0 when within the bound."""
    if rate <= bound:
        return 0
    return int(round((rate - bound) / bound * window_ms))


class ClientQuotas:
    """Sensors by (quota key, sensor key); ``record`` adds a value and answers the throttle
    time. ``entities`` is read from the current image at every call (a new image object
    invalidates the resolution cache)."""

    def __init__(self, samples: int = DEFAULT_SAMPLES, window_ms: int = DEFAULT_WINDOW_MS):
        self.samples, self.window_ms = samples, window_ms
        self.sensors: dict[tuple, list] = {}  # (key, tags) -> [Rate, last_record_ms]
        self._entities: dict | None = None
        self._resolved: dict[tuple, tuple] = {}
        self._records = 0
        self.throttled = 0  # answers that carried a throttle time (a counter for metrics/tests)
        self.buckets: dict[tuple, TokenBucket] = {}  # controller_mutation_rate, by sensor key

    def quota(self, entities: dict, key: str, user: str, client_id: str) -> tuple[tuple, float | None]:
        if entities is not self._entities:
            self._entities, self._resolved = entities, {}
        found = self._resolved.get((key, user, client_id))
        if found is None:
            found = self._resolved[(key, user, client_id)] = resolve(entities, key, user, client_id)
        return found

    def record(self, entities: dict, key: str, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Record ``value`` for the entity ``(user, client_id)`` maps to; the throttle time in
        ms (0: within its quota, or no quota applies: then nothing is recorded)."""
        tags, bound = self.quota(entities, key, user, client_id)
        if bound is None:
            return 0
        self._records += 1
        if self._records % _CHECK_EXPIRY_EVERY == 0:
            self.expire(now_ms)
        sensor = self.sensors.get((key, tags))
        if key != REQUEST:
            if sensor is None:
                sensor = self.sensors[(key, tags)] = [TokenBucket(), now_ms]
            bucket = sensor[0]
            sensor[1] = now_ms
            burst = self.samples * self.window_ms / 1000.0 * bound
            bucket.tokens = bucket.refill(bound, burst, now_ms) - value
            ms = mutation_throttle_ms(bucket.tokens, bound)
            if ms > 0:
                self.throttled += 1
            return ms
        if sensor is None:
            sensor = self.sensors[(key, tags)] = [Rate(self.samples, self.window_ms), now_ms]
        rate = sensor[0]
        rate.record(value, now_ms)
        sensor[1] = now_ms
        measured = rate.measure(now_ms)
        if measured <= bound:
            return 0
        ms = throttle_ms(measured, bound, rate.window_ms_at(now_ms))
        if key == REQUEST:
            ms = min(ms, self.window_ms)  # ClientRequestQuotaManager's bounded throttle time
        if ms > 0:
            self.throttled += 1
        return ms

    def mutate(self, entities: dict, user: str, client_id: str, permits: list, strict: bool,
               now_ms: int) -> tuple[list[bool], int]:
        """``controller_mutation_rate``: which of the topics (their partition counts, in
        request order) may proceed, and the throttle time."""
        return _mutate(self, entities, user, client_id, permits, strict, now_ms)

    def expire(self, now_ms: int) -> None:
        for k in [k for k, s in self.sensors.items() if now_ms - s[1] > SENSOR_EXPIRY_MS]:
            del self.sensors[k]


class TokenBucket:
    """Kafka's ``TokenBucket`` stat: refills at ``rate`` per second up to ``burst``; may go
    negative (a request larger than what is left is still taken whole)."""

    __slots__ = ("tokens", "last_ms")

    def __init__(self):
        self.tokens, self.last_ms = None, 0

    def refill(self, rate: float, burst: float, now_ms: int) -> float:
        if self.tokens is None:  # Kafka starts at 0 tokens last refilled at epoch 0: full
            self.tokens = burst
        self.tokens = min(burst, self.tokens + rate * (now_ms - self.last_ms) / 1000.0)
        self.last_ms = now_ms
        return self.tokens


def mutation_throttle_ms(tokens: float, rate: float) -> int:
    """ControllerMutationQuotaManager.throttleTimeMs: the time to refill to zero."""
    return int(round(-tokens / rate * 1000)) if tokens < 0 else 0


def _mutate(q: "ClientQuotas", entities: dict, user: str, client_id: str, permits: list, strict: bool,
            now_ms: int) -> tuple[list[bool], int]:
    tags, rate = q.quota(entities, MUTATION, user, client_id)
    if rate is None:
        return [True] * len(permits), 0
    bucket = q.buckets.get(tags)
    if bucket is None:
        bucket = q.buckets[tags] = TokenBucket()
    burst = q.samples * q.window_ms / 1000.0 * rate
    accepted = []
    for n in permits:
        tokens = bucket.refill(rate, burst, now_ms)
        if strict and tokens < 0:
            accepted.append(False)  # StrictControllerMutationQuota: checked before recording
            continue
        bucket.tokens = min(burst, tokens - n)
        accepted.append(True)
    return accepted, mutation_throttle_ms(bucket.tokens, rate)
