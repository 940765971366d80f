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


def kcat_librdkafka() -> tuple:
    """The librdkafka version kcat runs on, as a tuple of ints (``kcat -V``)."""
    import re
    import subprocess
    out = subprocess.run(["kcat", "-V"], capture_output=True, text=True, timeout=10).stdout
    m = re.search(r"librdkafka (\d+)\.(\d+)\.(\d+)", out)
    return tuple(int(x) for x in m.groups()) if m else (0, 0, 0)


def kcat_roundtrip(conf: dict, topic: str, value: bytes, timeout: float = 60.0) -> None:
    """``value`` produced with ``kcat -P`` and read back with ``kcat -C -e``, with the
    librdkafka settings in ``conf`` (``bootstrap.servers`` among them) given as ``-X``."""
    import shutil
    import subprocess
    assert shutil.which("kcat"), "kcat is installed by tools/test.sh (apt)"
    args = [f"-X{k}={v}" for k, v in conf.items() if k != "logger"]
    done = subprocess.run(["kcat", *args, "-P", "-t", topic], input=value + b"\n", capture_output=True,
                          timeout=timeout)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    read = subprocess.run(["kcat", *args, "-C", "-t", topic, "-o", "beginning", "-e", "-q"], capture_output=True,
                          timeout=timeout)
    assert read.returncode == 0, read.stderr.decode(errors="replace")
    assert value in read.stdout.split(b"\n"), read.stdout[-200:]
