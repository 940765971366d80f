"""``ControllerResult`` and ``ControllerContext``: the contract between a controller request
handler and whoever runs it (the active controller in ``server/``, or the simulator).

A handler is a pure function ``handle(ctx, request) -> ControllerResult``: it reads the
uncommitted image in ``ctx``, returns the metadata records to propose and the response to send
once they commit. It must not mutate anything, do I/O, or read the clock (``ctx.now_ms``).
A handler that only reads (DescribeAcls, ListPartitionReassignments, validate-only CreateTopics)
returns no records; its response may be sent at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ControllerResult:
    #: metadata records (``kraft.metadata.records`` instances) to append as one unit
    records: list = field(default_factory=list)
    #: the protocol response (a ``kraft.protocol`` Response) to send after ``records`` commit
    response: Any = None
    #: True: wrap ``records`` in Begin/EndTransaction so replay applies all or none (KIP-868)
    atomic: bool = False
    #: The rest of a non-atomic unit, made a step at a time: ``steps(image) -> (records, done)``,
    #: each step computed on the view after the previous ones (nothing else runs in between) and
    #: proposed before the next, so a unit of hundreds of thousands of records (a fence at a
    #: million partitions) never holds the loop for long; ``response`` is sent once the last
    #: step's records commit. None: ``records`` is the whole unit.
    steps: Any = None


@dataclass(frozen=True)
class ControllerContext:
    #: the active controller's uncommitted view: committed image + records proposed so far
    image: Any
    #: request api version (responses may carry fewer fields at older versions)
    version: int
    #: the controller's clock in ms, injected (sans-I/O, deterministic under the simulator)
    now_ms: int
    #: controller settings by Kafka config name (num.partitions, default.replication.factor,
    #: min.insync.replicas, unclean.leader.election.enable, broker.session.timeout.ms, ...)
    settings: dict = field(default_factory=dict)
    #: node id of this controller (for DescribeCluster's controller_id and logs)
    node_id: int = -1
    #: cluster id of this quorum
    cluster_id: str = ""
    #: the controller's soft state about broker leases (``BrokerLeases``), read-only here
    leases: Any = None
    #: an offset above every offset written so far: new broker epochs come from it (Kafka uses
    #: the next write offset), so they only ever grow
    next_offset: int = 0
    #: about how many records one step of a stepwise unit (``ControllerResult.steps``) proposes
    step_records: int = 10_000
