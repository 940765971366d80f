"""Operator-side client of a cluster's brokers for partition placement: the current replica
assignment (Metadata), AlterPartitionReassignments, ListPartitionReassignments and ElectLeaders,
sent to a broker from ``--bootstrap-server`` (which forwards them to the active controller, as
Kafka's brokers do). Used by ``kraft reassign-partitions`` and ``kraft leader-election``.

Requests are tried on each bootstrap broker in turn until one answers; answers are returned as
decoded, error codes and all: deciding what an error means is the caller's job.
"""

from __future__ import annotations

from kraft.client.node_client import NodeClient
from kraft.client.quorum import parse_address
from kraft.errors import KraftError, NetworkError
from kraft.protocol import MetadataRequest
from kraft.protocol.messages.elect_leaders import ElectLeadersRequest
from kraft.protocol.messages.partition_reassignments import (AlterPartitionReassignmentsRequest,
                                                             ListPartitionReassignmentsRequest)

METADATA_VERSION = 9
ALTER_REASSIGNMENTS_VERSION = 0
LIST_REASSIGNMENTS_VERSION = 0
ELECT_LEADERS_VERSION = 2


class NoBrokerAnswered(KraftError):
    """No bootstrap broker answered the request."""


class PartitionAdmin:
    def __init__(self, bootstrap: str, *, timeout_s: float = 30.0):
        self.addresses = [parse_address(s) for s in bootstrap.split(",") if s.strip()]
        if not self.addresses:
            raise ValueError("--bootstrap-server: no address given")
        self.timeout_ms = int(timeout_s * 1000)
        self._clients: dict = {}

    async def close(self) -> None:
        for c in self._clients.values():
            await c.close()
        self._clients.clear()

    async def _call(self, request, version: int):
        last = None
        for address in self.addresses:
            client = self._clients.get(address)
            if client is None:
                client = self._clients[address] = NodeClient(*address, client_id="kraft-admin",
                                                             request_timeout_ms=self.timeout_ms + 5000)
            try:
                return await client.request(request, version)
            except NetworkError as exc:
                last = exc
        raise NoBrokerAnswered(f"no broker of {', '.join(f'{h}:{p}' for h, p in self.addresses)} answered: {last}")

    async def assignment(self, topics=None) -> dict[tuple[str, int], list[int]]:
        """(topic, partition) -> replicas, for ``topics`` (None: every topic)."""
        req = MetadataRequest(topics=None if topics is None else [MetadataRequest.Topic(name=t) for t in topics],
                              allow_auto_topic_creation=False)
        resp = await self._call(req, METADATA_VERSION)
        out = {}
        for t in resp.topics:
            if t.error_code:
                continue
            for p in t.partitions:
                out[(t.name, p.partition_index)] = list(p.replica_nodes)
        return out

    async def broker_ids(self) -> list[int]:
        """The ids of the brokers the cluster's Metadata names."""
        resp = await self._call(MetadataRequest(topics=[], allow_auto_topic_creation=False), METADATA_VERSION)
        return sorted(b.node_id for b in resp.brokers)

    async def alter(self, moves: dict[tuple[str, int], list[int] | None]):
        """AlterPartitionReassignments for ``moves`` ((topic, partition) -> target replicas, or
        None to cancel); the response."""
        R = AlterPartitionReassignmentsRequest
        topics: dict[str, list] = {}
        for (topic, p), replicas in sorted(moves.items(), key=lambda kv: kv[0]):
            topics.setdefault(topic, []).append(R.Topic.Partition(partition_index=p, replicas=replicas))
        req = R(timeout_ms=self.timeout_ms, topics=[R.Topic(name=t, partitions=ps) for t, ps in topics.items()])
        return await self._call(req, ALTER_REASSIGNMENTS_VERSION)

    async def ongoing(self, partitions=None):
        """ListPartitionReassignments for ``partitions`` (None: every reassignment)."""
        L = ListPartitionReassignmentsRequest
        topics = None
        if partitions is not None:
            by_topic: dict[str, list] = {}
            for topic, p in partitions:
                by_topic.setdefault(topic, []).append(p)
            topics = [L.Topic(name=t, partition_indexes=sorted(ps)) for t, ps in sorted(by_topic.items())]
        return await self._call(L(timeout_ms=self.timeout_ms, topics=topics), LIST_REASSIGNMENTS_VERSION)

    async def elect(self, election_type: int, partitions=None):
        """ElectLeaders (``election_type`` 0 preferred, 1 unclean) for ``partitions`` (None: all)."""
        E = ElectLeadersRequest
        tps = None
        if partitions is not None:
            by_topic: dict[str, list] = {}
            for topic, p in partitions:
                by_topic.setdefault(topic, []).append(p)
            tps = [E.TopicPartitions(topic=t, partitions=sorted(ps)) for t, ps in sorted(by_topic.items())]
        return await self._call(E(election_type=election_type, topic_partitions=tps, timeout_ms=self.timeout_ms),
                                ELECT_LEADERS_VERSION)
