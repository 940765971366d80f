"""An admin call made while the cluster is still starting is answered as soon as brokers can
answer it, not a minute later. librdkafka's admin client waited its whole operation timeout
(60 s) when a broker's first Metadata answers listed no broker at all (it treats that as a
failed request and did not ask again) or named a controller it had no address for: the group
and replication checkers spent a minute on their first CreateTopics."""

from __future__ import annotations

import logging
import time

import pytest

from kraft.cli.local_cluster import LOW_LATENCY, LocalCluster, wait_for

ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.integration
_QUIET = logging.getLogger("admin-at-start")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False


def test_create_topics_right_after_the_processes_start(tmp_path):
    cluster = LocalCluster(str(tmp_path), 3, brokers=3, overrides=dict(LOW_LATENCY)).create()
    cluster.start()
    try:
        began = time.monotonic()
        admin = AdminClient({"bootstrap.servers": cluster.broker_bootstrap, "logger": _QUIET})
        outcomes = []
        while time.monotonic() - began < 90:
            future = admin.create_topics([NewTopic("early", 3, 3)], operation_timeout=60)["early"]
            try:
                future.result(90)
                outcomes.append("created")
                break
            except ck.KafkaException as exc:  # too few brokers registered yet: a definite answer, retried
                outcomes.append(exc.args[0].name())
                if outcomes[-1] == "TOPIC_ALREADY_EXISTS":
                    # An earlier attempt created it and its answer was lost on the client's side
                    # (seen once: librdkafka's _DESTROY_BROKER as it swapped its bootstrap
                    # connection for the learned broker's); on a fresh cluster nothing else could.
                    break
                time.sleep(0.5)
        took = time.monotonic() - began
        assert outcomes[-1] in ("created", "TOPIC_ALREADY_EXISTS"), outcomes
        assert "_TIMED_OUT" not in outcomes and took < 30, (took, outcomes)
        # (its partitions show once the brokers have the image with their leaders)
        assert wait_for(lambda: len(admin.list_topics("early", timeout=5).topics["early"].partitions) == 3, 30, 0.2)
    finally:
        cluster.close()
