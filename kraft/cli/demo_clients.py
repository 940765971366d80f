"""The client half of ``kraft demo``: a real Kafka client library (confluent-kafka, i.e.
librdkafka) against the demo's brokers, unmodified. Creates a topic through a broker (the
broker forwards it to the active controller, answered after commit), produces keyed records
with acks=all and lz4, reads them back through a consumer group (subscribe; half, commit, the
lag as ``kraft consumer-groups --describe`` shows it; the rest, commit, lag 0), checks that
nothing acknowledged is missing and that each key's records came back in order, and
prints command lines a user can paste (kcat, confluent-kafka). Fails with a one-line reason.
"""

from __future__ import annotations

import asyncio
import time

from kraft.client.node_client import NodeClient
from kraft.errors import KraftError
from kraft.protocol import MetadataRequest

QUIET = {"log_level": 0}  # librdkafka's own logging would interleave with the demo's lines


def _client_library():
    try:
        import confluent_kafka
        import confluent_kafka.admin  # noqa: F401 (a submodule: not imported by the package)
    except ImportError as exc:  # a dependency of kraft; only a broken install lacks it
        raise KraftError(f"confluent-kafka does not import ({exc}): pip install confluent-kafka") from exc
    return confluent_kafka


async def _serving(address, want: list[int]) -> bool:
    """The broker at ``address`` serves and its Metadata lists ``want`` (a broker that is not
    registered, or fenced, leaves itself out of its own answer)."""
    client = NodeClient(*address, client_id="kraft-demo")
    try:
        md = await client.request(MetadataRequest(topics=None), 9)
        return sorted(b.node_id for b in md.brokers) == want
    except (KraftError, OSError):
        return False
    finally:
        await client.close()


async def wait_for_brokers(addresses: dict, timeout_s: float = 60.0) -> float:
    """Seconds until every broker in ``addresses`` (id -> (host, port)) serves and sees all."""
    want = sorted(addresses)
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        if all([await _serving(a, want) for a in addresses.values()]):
            return time.monotonic() - start
        await asyncio.sleep(0.2)
    raise KraftError(f"the brokers {want} did not all serve within {timeout_s:.0f} s")


def run_clients(bootstrap: str, say, *, topic: str = "demo", partitions: int = 3, replication: int = 3,
                records: int = 3000) -> None:
    _client_library()  # a one-line error if confluent-kafka does not import
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    start = time.monotonic()
    for name, fut in admin.create_topics([NewTopic(topic, partitions, replication)], operation_timeout=20).items():
        fut.result(30)
    say(f"  confluent-kafka AdminClient: created topic {topic!r} ({partitions} partitions, replication "
        f"factor {replication}) in {(time.monotonic() - start) * 1000:.0f} ms")

    acked, errors = [], []
    # Idempotent: each key's records keep their order through retries (a first request to a new
    # topic may be refused while its leaders start, and a plain producer retries it after the next).
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "compression.type": "lz4",
                         "enable.idempotence": True, "linger.ms": 5, **QUIET})

    def delivered(err, msg):
        (errors if err is not None else acked).append(err or (msg.partition(), msg.offset(), msg.key(), msg.value()))

    start = time.monotonic()
    for i in range(records):
        producer.produce(topic, key=f"user-{i % 10}".encode(), value=f"event-{i}".encode(), on_delivery=delivered)
        producer.poll(0)
    if producer.flush(30) != 0 or errors:
        raise KraftError(f"produce failed: {errors[:1] or 'records still queued after 30 s'}")
    secs = time.monotonic() - start
    say(f"  confluent-kafka Producer (acks=all, lz4, idempotent): {len(acked)} records acknowledged in {secs * 1000:.0f} ms")

    got = _consume_through_group(bootstrap, topic, len(acked), admin, say)
    missing = set(acked) - set(got)
    if missing:
        raise KraftError(f"{len(missing)} acknowledged records not read back, e.g. {sorted(missing)[0]}")
    by_key: dict = {}
    for _, _, key, value in sorted(set(got), key=lambda r: (r[0], r[1])):
        by_key.setdefault(key, []).append(int(value.split(b"-")[1]))
    if any(v != sorted(v) for v in by_key.values()):
        raise KraftError("a key's records came back out of order")
    say(f"  every acknowledged record was read back, each of {len(by_key)} keys in order")


GROUP = "kraft-demo"


def _consume_through_group(bootstrap: str, topic: str, total: int, admin, say) -> list:
    """Subscribe as group ``kraft-demo``, read half, commit, show the lag (kafka-consumer-groups'
    table), read the rest, commit, show it again: (partition, offset, key, value) read."""
    from confluent_kafka import Consumer
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", **QUIET})
    got: list = []
    start = time.monotonic()
    try:
        consumer.subscribe([topic])
        for target, what in ((total // 2, "half"), (total, "the rest")):
            deadline = time.monotonic() + 30
            while len(got) < target and time.monotonic() < deadline:
                m = consumer.poll(0.2)
                if m is not None and m.error() is None:
                    got.append((m.partition(), m.offset(), m.key(), m.value()))
            if len(got) < target:
                raise KraftError(f"the group consumer read {len(got)} of {target} records within 30 s")
            consumer.commit(asynchronous=False)
            say(f"  confluent-kafka Consumer (group {GROUP!r}, subscribe): read {what} ({len(got)} records in "
                f"{(time.monotonic() - start) * 1000:.0f} ms), committed")
            _show_lag(admin, say)
    finally:
        consumer.close()
    return got


def _show_lag(admin, say) -> None:
    from types import SimpleNamespace
    from kraft.cli.consumer_groups import OFFSETS_HEADER, OFFSETS_WIDTHS, describe, offset_rows, table_lines
    args = SimpleNamespace(timeout=10_000)
    rows = offset_rows(admin, args, GROUP, describe(admin, args, [GROUP])[GROUP])
    say(f"\n$ kraft consumer-groups --bootstrap-server ... --describe --group {GROUP}")
    for line in table_lines(OFFSETS_HEADER, [r[:6] + [r[6][:24] + ("..." if len(r[6]) > 24 else "")] + r[7:]
                                             for r in rows], OFFSETS_WIDTHS):
        say(f"    {line}")
    say("    (LAG: records not yet consumed; the same figures are on the coordinator's /metrics as "
        "kraft_consumer_group_lag)\n")


def client_lines(bootstrap: str, topic: str = "demo") -> list[str]:
    """Command lines to paste while the demo cluster runs (``kraft demo --clients``)."""
    first = bootstrap.split(",")[0]
    return [
        f"kcat -b {bootstrap} -L",
        f"echo hello | kcat -b {bootstrap} -t {topic} -P",
        f"kcat -b {bootstrap} -t {topic} -C -o beginning -e",
        "python -c \"from confluent_kafka import Producer; p = Producer({'bootstrap.servers': "
        f"'{first}'}}); p.produce('{topic}', b'hi'); print(p.flush(10))\"",
        # Kafka's everyday tools, as kraft commands (the README's tour uses B=<this address>)
        f"kraft topics --bootstrap-server {first} --describe --topic {topic}",
        f"kraft console-consumer --bootstrap-server {first} --topic {topic} --from-beginning --max-messages 5",
        f"kraft consumer-groups --bootstrap-server {first} --describe --group {GROUP}",
    ]
