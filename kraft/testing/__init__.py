"""kraft.testing: a deterministic simulator for the Raft core, public for our tests and users.

:class:`SimCluster` runs RaftCore replicas over a simulated network (drops, delays,
duplicates, reordering, partitions) on a virtual clock, with in-memory disks that lose
unflushed data on crash, and checks safety invariants after every event.
``kraft.testing.chaos`` is the one fault-injection driver: randomised fault schedules per
(mode, seed, profile) and a one-line replay command for any failure. Its modes are workloads:
``raft_chaos`` (the quorum alone), ``controller_chaos`` (a ``QuorumController`` on every voter,
``controller_node``, simulated brokers and admins, ``controller_clients``, and the controller
invariants, ``controller_checks``) and ``replication_chaos`` (the brokers' replication cores).
No real sockets, time or threads.
"""

from kraft.testing.cluster import SimCluster
from kraft.testing.invariants import InvariantChecker, InvariantViolation
from kraft.testing.memory_log import InMemoryLog
from kraft.testing.network import NetworkFaults, SimulatedNetwork
from kraft.testing.node import SimNode
from kraft.testing.scheduler import EventQueue
from kraft.testing.state_machine import CommittedHistory, SimStateMachine

__all__ = [
    "CommittedHistory", "EventQueue", "InMemoryLog", "InvariantChecker", "InvariantViolation",
    "NetworkFaults", "SimCluster", "SimNode", "SimStateMachine", "SimulatedNetwork",
]
