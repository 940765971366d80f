"""Real clients against fetch sessions (KIP-227): kafka-python keeps an incremental fetch
session by default and must read everything, in two waves, through it; librdkafka and
aiokafka send sessionless fetches (epoch -1) and must leave no session behind."""

from __future__ import annotations

import asyncio

import pytest
from broker_helpers import BrokerThread

pytestmark = pytest.mark.integration


def sessions(b) -> list:
    """(session id, partitions) of every session the broker holds."""
    return b.call(lambda: [(s.id, len(s.partitions)) for s in b.node.handlers.fetch.sessions.cache.sessions.values()])


def test_kafka_python_reads_two_waves_through_one_incremental_session(tmp_path):
    kafka = pytest.importorskip("kafka", reason="kafka-python is in the test extra")
    with BrokerThread(str(tmp_path), {"ks": 3}) as b:
        prod = kafka.KafkaProducer(bootstrap_servers=b.bootstrap, acks=1, enable_idempotence=False)
        cons = kafka.KafkaConsumer(bootstrap_servers=b.bootstrap, enable_auto_commit=False,
                                   consumer_timeout_ms=10_000, fetch_max_wait_ms=100)
        tps = [kafka.TopicPartition("ks", p) for p in range(3)]
        cons.assign(tps)
        cons.seek_to_beginning(*tps)
        try:
            got = []
            for wave in (1, 2):
                for i in range(30):
                    prod.send("ks", value=b"w%d-%d" % (wave, i), partition=i % 3)
                prod.flush(10)
                got += [m.value for _, m in zip(range(30), cons)]
                held = sessions(b)
                assert [n for _, n in held] == [3], held  # one session with the three partitions
            assert sorted(got) == sorted(b"w%d-%d" % (w, i) for w in (1, 2) for i in range(30))
        finally:
            cons.close()
            prod.close()


def test_sessionless_clients_leave_no_session(tmp_path):
    ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra")
    aiokafka = pytest.importorskip("aiokafka", reason="aiokafka is in the test extra")
    with BrokerThread(str(tmp_path), {"nl": 1}) as b:
        p = ck.Producer({"bootstrap.servers": b.bootstrap})
        for i in range(10):
            p.produce("nl", value=b"v%d" % i, partition=0)
        assert p.flush(10) == 0
        c = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": "g", "enable.auto.commit": False})
        c.assign([ck.TopicPartition("nl", 0, ck.OFFSET_BEGINNING)])
        got = []
        try:
            for _ in range(100):
                m = c.poll(0.2)
                if m is not None and m.error() is None:
                    got.append(m.value())
                if len(got) == 10:
                    break
        finally:
            c.close()

        async def aio():
            cons = aiokafka.AIOKafkaConsumer(bootstrap_servers=b.bootstrap, enable_auto_commit=False)
            await cons.start()
            try:
                tp = aiokafka.TopicPartition("nl", 0)
                cons.assign([tp])
                await cons.seek_to_beginning(tp)
                out = []
                while len(out) < 10:
                    batch = await cons.getmany(timeout_ms=2000)
                    out += [m.value for ms in batch.values() for m in ms]
                return out
            finally:
                await cons.stop()
        assert len(got) == 10 and len(asyncio.run(asyncio.wait_for(aio(), 30))) == 10
        assert sessions(b) == []
