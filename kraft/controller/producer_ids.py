"""AllocateProducerIds (67): Kafka's ``ProducerIdControlManager.generateNextProducerId``.

A broker registered at the epoch it names gets the next block of :data:`BLOCK_SIZE` ids,
starting at the image's next producer id (0 before any block); one ``ProducerIdsRecord`` moves
the next id past the block. A missing registration or another epoch is STALE_BROKER_EPOCH; a
block that would pass 2**63 - 1 is UNKNOWN_SERVER_ERROR, as in Kafka. Nothing here mutates
the image or does I/O.
"""

from __future__ import annotations

from kraft.controller.result import ControllerContext, ControllerResult
from kraft.errors import ErrorCode
from kraft.metadata.records import ProducerIdsRecord
from kraft.protocol.messages.allocate_producer_ids import AllocateProducerIdsResponse

BLOCK_SIZE = 1000  # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
_LONG_MAX = 2**63 - 1


def handle_allocate_producer_ids(ctx: ControllerContext, request) -> ControllerResult:
    broker = ctx.image.cluster.brokers.get(request.broker_id)
    if broker is None or broker.epoch != request.broker_epoch:
        return ControllerResult(response=AllocateProducerIdsResponse(error_code=int(ErrorCode.STALE_BROKER_EPOCH)))
    first = max(ctx.image.producer_ids.next_producer_id, 0)
    if first > _LONG_MAX - BLOCK_SIZE:
        return ControllerResult(response=AllocateProducerIdsResponse(error_code=int(ErrorCode.UNKNOWN_SERVER_ERROR)))
    record = ProducerIdsRecord(broker_id=request.broker_id, broker_epoch=request.broker_epoch,
                               next_producer_id=first + BLOCK_SIZE)
    response = AllocateProducerIdsResponse(error_code=0, producer_id_start=first, producer_id_len=BLOCK_SIZE)
    return ControllerResult(records=[record], response=response)


HANDLERS = {67: handle_allocate_producer_ids}
