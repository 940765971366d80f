"""AllocateProducerIds on the controller (Kafka's ``ProducerIdControlManager``): blocks of 1000
from the image's next producer id, the broker epoch checked against the registration."""

from __future__ import annotations

import pytest

from kraft.controller.producer_ids import BLOCK_SIZE, HANDLERS, handle_allocate_producer_ids
from kraft.errors import ErrorCode
from kraft.metadata import ProducerIdsRecord
from kraft.protocol import AllocateProducerIdsRequest, AllocateProducerIdsResponse
from admin_fixtures import apply, cluster_image, context


def allocate(image, broker_id=1, epoch=100):
    return handle_allocate_producer_ids(context(image, 0), AllocateProducerIdsRequest(broker_id=broker_id,
                                                                                      broker_epoch=epoch))


def test_handlers_table_and_block_size():
    assert set(HANDLERS) == {67} and BLOCK_SIZE == 1000


def test_consecutive_blocks_do_not_overlap():
    image = cluster_image()
    seen = []
    for broker_id in (1, 2, 1):
        result = allocate(image, broker_id)
        response = result.response
        assert response.error_code == 0 and response.producer_id_len == 1000
        seen.append(response.producer_id_start)
        image = apply(image, result.records)  # the next request sees this block taken
    assert seen == [0, 1000, 2000]
    assert image.producer_ids.next_producer_id == 3000


def test_record_names_the_broker_and_its_epoch():
    [record] = allocate(cluster_image(), 2).records
    assert record == ProducerIdsRecord(broker_id=2, broker_epoch=100, next_producer_id=1000)


@pytest.mark.parametrize("broker_id,epoch", [(1, 99), (1, -1), (9, 100)])
def test_wrong_epoch_or_unknown_broker_is_stale_broker_epoch(broker_id, epoch):
    result = allocate(cluster_image(), broker_id, epoch)
    assert result.response.error_code == ErrorCode.STALE_BROKER_EPOCH and result.records == []


def test_exhausted_id_space_is_unknown_server_error():
    image = apply(cluster_image(), [ProducerIdsRecord(broker_id=1, broker_epoch=100, next_producer_id=2**63 - 10)])
    result = allocate(image)
    assert result.response.error_code == ErrorCode.UNKNOWN_SERVER_ERROR and result.records == []


def test_response_bytes_worked_out_by_hand():
    response = allocate(cluster_image()).response
    data = response.encode(0)
    # ThrottleTimeMs, ErrorCode, ProducerIdStart, ProducerIdLen, no tagged fields
    assert data == bytes.fromhex("00000000" "0000" "0000000000000000" "000003e8" "00")
    assert AllocateProducerIdsResponse.decode(data, 0) == response
