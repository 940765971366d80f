"""Replication quotas (Kafka's ``ReplicationQuotaManager``), so that a reassignment's catch-up
traffic can be throttled without slowing the replicas that are in sync. Pure arithmetic over an
injected clock; the fetch handler (leader side) and the replica fetcher (follower side) ask it.

* **Which replicas are throttled**: the topic configs ``leader.replication.throttled.replicas``
  and ``follower.replication.throttled.replicas``, lists of ``partition:broker`` (``*``: every
  partition of the topic). This broker's leader quota throttles the partitions whose leader-side
  entries name this broker; its follower quota those whose follower-side entries name it.
* **The rate**: the broker's dynamic ``leader.replication.throttled.rate`` /
  ``follower.replication.throttled.rate`` (bytes/s; per broker, else the cluster default; none:
  unlimited), measured as Kafka's ``Rate`` over ``replication.quota.window.num`` (11) samples of
  ``replication.quota.window.size.seconds`` (1 s), counting only the throttled partitions' bytes.
* **The rule** (Kafka's ``shouldLeaderThrottle`` / ``shouldFollowerThrottle``): a throttled
  partition of a replica that is *not in sync* gets no records while the measured rate is above
  the bound; in-sync replicas are never held back, so acks=all writes do not wait on a throttle.
"""

from __future__ import annotations

from kraft.broker.quotas import Rate
from kraft.metadata.configs import BROKER, TOPIC

LEADER, FOLLOWER = "leader", "follower"
WINDOWS, WINDOW_MS = 11, 1000  # Kafka's replication.quota.window.num / .size.seconds defaults


def throttled_partitions(entries: str, broker_id: int) -> set | None:
    """Partitions of a topic whose replica on ``broker_id`` a throttled-replicas list names;
    None for ``*`` (all of them)."""
    items = [e.strip() for e in (entries or "").split(",") if e.strip()]
    if items == ["*"]:
        return None
    out = set()
    for item in items:
        partition, _, broker = item.partition(":")
        try:
            if int(broker) == broker_id:
                out.add(int(partition))
        except ValueError:
            continue  # the controller validates the list; an old record may not parse
    return out


class ReplicationQuota:
    """One side (``LEADER`` or ``FOLLOWER``) of one broker."""

    def __init__(self, kind: str, broker_id: int, *, samples: int = WINDOWS, window_ms: int = WINDOW_MS):
        self.kind, self.broker_id = kind, broker_id
        self.rate = Rate(samples, window_ms)
        self.bound: float | None = None  # bytes/s; None: not limited
        self._topics: dict[str, set | None] = {}  # topic -> throttled partitions (None: all)
        self._configs = None  # the image's configs the lists were read from
        self.throttled_total = 0  # partitions answered or fetched without records because of it

    def update(self, image) -> None:
        configs = image.configs
        if configs is self._configs:
            return
        self._configs = configs
        rate_key, list_key = f"{self.kind}.replication.throttled.rate", f"{self.kind}.replication.throttled.replicas"
        self.bound = None
        for resource in (str(self.broker_id), ""):
            value = configs.config(BROKER, resource).get(rate_key)
            if value is not None:
                self.bound = float(value)
                break
        topics = {}
        for (kind, name), values in configs.resources.items():
            entries = values.get(list_key) if kind == TOPIC else None
            if entries:
                partitions = throttled_partitions(entries, self.broker_id)
                if partitions is None or partitions:
                    topics[name] = partitions
        self._topics = topics

    def throttled(self, topic: str, partition: int) -> bool:
        if topic not in self._topics:
            return False
        partitions = self._topics[topic]
        return partitions is None or partition in partitions

    def holds_back(self, topic: str, partition: int, in_sync: bool, now_ms: int) -> bool:
        """Kafka's should(Leader|Follower)Throttle: no records for this replica now."""
        if in_sync or self.bound is None or not self.throttled(topic, partition):
            return False
        if self.rate.measure(now_ms) <= self.bound:
            return False
        self.throttled_total += 1
        return True

    def record(self, nbytes: int, now_ms: int) -> None:
        if nbytes and self.bound is not None:
            self.rate.record(nbytes, now_ms)
