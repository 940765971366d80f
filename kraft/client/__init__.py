"""Our asyncio Kafka client: ``NodeClient`` (one connection, correlation ids, timeouts,
reconnects), ``Consumer`` (assigned partitions, fetched records decoded into columns) and the quorum's operator client (``QuorumClient`` to describe a quorum and find
its leader, ``QuorumWriter`` to write through it). Used by the CLI, the Raft driver's peer
connections, tools, tests and benchmarks. Must not import server internals."""

from kraft.client.consumer import Consumer, FetchedRecords
from kraft.client.node_client import ConnectionRefused, NodeClient
from kraft.client.quorum import NoNodeReachable, QuorumClient, QuorumDescription, QuorumWriter, parse_address

__all__ = ["ConnectionRefused", "Consumer", "FetchedRecords", "NoNodeReachable", "NodeClient", "QuorumClient", "QuorumDescription",
           "QuorumWriter", "parse_address"]
