"""Kafka's controller metrics in Prometheus form, read over HTTP from a real single-voter
controller after it registered a broker and created a topic: every gauge tells the truth about
the committed image, and the queue / commit / per-record-type apply histograms saw the work."""

from __future__ import annotations

import asyncio

from controller_helpers import Controller
from server_helpers import run, settle
from test_metrics import _http, parse_exposition
from kraft.protocol import BrokerHeartbeatRequest, CreateTopicsRequest
from kraft.server.controller_gauges import controller_gauges
from kraft.server.metrics import MetricsServer
from test_every_advertised_version import _registration


def _value(families, name, **labels):
    """The sample ``name`` (a histogram's ``_count`` too) whose labels include ``labels``."""
    family = name
    if family not in families:
        for suffix in ("_count", "_sum", "_bucket"):
            if name.endswith(suffix):
                family = name[:-len(suffix)]
    for sample, got, value in families[family]["samples"]:
        if sample == name and all(got.get(k) == v for k, v in labels.items()):
            return value
    raise AssertionError(f"no sample {name} {labels}")


def test_controller_metrics_over_http_describe_the_committed_image_and_the_work_done():
    async def main():
        node = Controller([1])
        await node.start()
        controller_gauges(node.metrics, node.controller)
        server = MetricsServer(node.metrics, "127.0.0.1", 0)
        await server.start()
        try:
            assert await settle(lambda: node.controller.active)
            reg = await asyncio.wait_for(node.requests.handle(_registration(0, 1), 0), 5)
            hb = await asyncio.wait_for(node.requests.handle(BrokerHeartbeatRequest(
                broker_id=1, broker_epoch=reg.broker_epoch, current_metadata_offset=node.log.end_offset()), 0), 5)
            assert not hb.is_fenced
            T = CreateTopicsRequest.Topic
            created = await asyncio.wait_for(node.requests.handle(CreateTopicsRequest(
                topics=[T(name="m", num_partitions=6, replication_factor=1)], timeout_ms=5000), 7), 5)
            assert created.topics[0].error_code == 0
            _, _, body = await _http(server.port, b"GET /metrics HTTP/1.0\r\n\r\n")
            fams = parse_exposition(body.decode())
        finally:
            await server.close()
            await node.close()
        v = lambda name, **kw: _value(fams, name, **kw)  # noqa: E731
        assert v("kraft_controller_active_controller_count") == 1
        assert v("kraft_controller_global_topic_count") == 1
        assert v("kraft_controller_global_partition_count") == 6
        assert v("kraft_controller_offline_partitions_count") == 0
        assert v("kraft_controller_preferred_replica_imbalance_count") == 0
        assert v("kraft_controller_active_broker_count") == 1
        assert v("kraft_controller_fenced_broker_count") == 0
        assert v("kraft_controller_metadata_error_count") == 0
        applied = v("kraft_controller_last_applied_record_offset")
        assert applied == node.controller.next_offset - 1 and applied >= 7  # registration, unfence, topic + 6
        assert v("kraft_controller_last_applied_record_timestamp") > 1_600_000_000_000
        assert v("kraft_controller_last_applied_record_lag_ms") >= 0
        # three requests went through the queue; each of the three writes committed
        for name in ("kraft_controller_event_queue_time_ms", "kraft_controller_event_queue_processing_time_ms"):
            assert fams[name]["type"] == "histogram" and v(name + "_count") == 3
        assert v("kraft_controller_metadata_commit_latency_ms_count") >= 3
        # per record type, weighted by records: one topic record, six partition records
        apply = "kraft_controller_apply_append_to_commit_ms"
        assert v(apply + "_count", record_type="PartitionRecord") == 6
        assert v(apply + "_count", record_type="TopicRecord") == 1
        assert v("kraft_controller_apply_commit_to_applied_ms_count", record_type="RegisterBrokerRecord") == 1
    run(main(), timeout=30)
