"""What the TLS, SASL/PLAIN and SCRAM client tests share: a librdkafka logger that keeps the
refused logins the tests provoke out of the output, and a produce-then-consume round trip
through a consumer group over whatever security settings a test passes."""

from __future__ import annotations

import logging
import time

SILENT = logging.getLogger("kraft-test-rdkafka-secured")
SILENT.addHandler(logging.NullHandler())
SILENT.propagate = False


def roundtrip(conf: dict, topic: str, value: bytes, timeout: float = 30.0) -> None:
    """``value`` produced to ``topic`` with ``conf`` (acknowledged) and read back by a consumer
    of a new group with the same settings, within ``timeout`` seconds."""
    from confluent_kafka import Consumer, Producer
    conf = {"logger": SILENT, **conf}
    p = Producer(conf)
    p.produce(topic, value)
    assert p.flush(timeout) == 0
    c = Consumer({**conf, "group.id": f"g-{value.decode()}", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    seen, deadline = [], time.monotonic() + timeout
    while value not in seen and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            seen.append(m.value())
    c.close()
    assert value in seen
