"""DescribeCluster (60) on a controller, answered from the committed image on any controller
(read-only, so it needs no leadership). v1 with endpoint type BROKERS lists the registered
unfenced brokers, each at its first listener (or the one named ``listener.name`` in the
settings); CONTROLLERS (and v0, which cannot say which it wants) lists the quorum's voters from
``controller.endpoints`` in the settings, as before. Pure: no I/O.
"""

from __future__ import annotations

from kraft.controller.result import ControllerResult
from kraft.metadata.authorization import authorized_operations
from kraft.protocol.messages.acls import RESOURCE_CLUSTER
from kraft.protocol.messages.describe_cluster import (ENDPOINT_BROKERS, ENDPOINT_CONTROLLERS, DescribeClusterRequest,
                                                      DescribeClusterResponse)

W = DescribeClusterResponse


def broker_entries(image, listener: str | None = None) -> list:
    out = []
    for b in sorted(image.cluster.brokers.values(), key=lambda b: b.id):
        if b.fenced or not b.listeners:
            continue
        ep = next((e for e in b.listeners if e.name == listener), b.listeners[0])
        out.append(W.Broker(broker_id=b.id, host=ep.host, port=ep.port, rack=b.rack))
    return out


def handle_describe_cluster(ctx, req: DescribeClusterRequest) -> ControllerResult:
    version = ctx.version
    ops = authorized_operations(RESOURCE_CLUSTER, req.include_cluster_authorized_operations)
    # The active controller (the quorum leader) as the caller knows it; this node otherwise.
    controller_id = ctx.settings.get("active.controller.id", ctx.node_id)
    if version >= 1 and req.endpoint_type == ENDPOINT_BROKERS:
        brokers = broker_entries(ctx.image, ctx.settings.get("listener.name"))
        return ControllerResult([], W(error_code=0, endpoint_type=ENDPOINT_BROKERS, cluster_id=ctx.cluster_id,
                                      controller_id=controller_id, brokers=brokers, cluster_authorized_operations=ops))
    voters = ctx.settings.get("controller.endpoints", ())
    return ControllerResult([], W(error_code=0, endpoint_type=ENDPOINT_CONTROLLERS if version >= 1 else 1,
                                  cluster_id=ctx.cluster_id, controller_id=controller_id,
                                  brokers=[W.Broker(broker_id=i, host=h, port=p) for i, h, p in voters],
                                  cluster_authorized_operations=ops))


HANDLERS = {60: handle_describe_cluster}
