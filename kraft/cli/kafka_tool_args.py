"""What Kafka's ``kafka-*.sh`` tools share, for their kraft twins: ``--bootstrap-server``,
``--command-config FILE`` (client properties), a confluent-kafka client built from them, and
failures of that client turned into one ``error:`` line (a ``ToolError``) instead of a
traceback. Must not print anything itself: the commands decide their output."""

from __future__ import annotations

import logging

from kraft.errors import KraftError

# Seconds an admin request may take; Kafka's tools use the client's default.api.timeout.ms.
DEFAULT_TIMEOUT_S = 30.0


class ToolError(KraftError):
    """A tool's expected failure, printed as one line by ``kraft.cli.main``."""


def check_bootstrap(value: str) -> str:
    """``HOST:PORT[,HOST:PORT]``; refused at once (a port out of range, no port) rather than by
    the client's retries minutes later."""
    for part in value.split(","):
        host, _, port = part.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ToolError(f"--bootstrap-server: expected HOST:PORT, got {part.strip()!r}")
        if not 0 < int(port) < 65536:
            raise ToolError(f"--bootstrap-server: port {port} is out of range (1-65535)")
    return value


def read_properties(path: str | None) -> dict[str, str]:
    """Java-properties ``key=value`` (or ``key: value``) lines; ``#``/``!`` comments."""
    if not path:
        return {}
    props = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line[0] in "#!":
                continue
            sep = min((i for i in (line.find("="), line.find(":")) if i > 0), default=-1)
            if sep < 0:
                raise ToolError(f"{path}:{n}: expected key=value, got {line!r}")
            props[line[:sep].strip()] = line[sep + 1:].strip()
    return props


def parse_key_values(items, what: str) -> dict[str, str]:
    """``--producer-property k=v`` / ``--property k=v`` (repeatable)."""
    out = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ToolError(f"{what}: expected key=value, got {item!r}")
        out[key.strip()] = value
    return out


def add_connection_args(p, *, required: bool = True) -> None:
    p.add_argument("--bootstrap-server", required=required, metavar="HOST:PORT[,HOST:PORT]",
                   help="the brokers to connect to")
    p.add_argument("--command-config", metavar="FILE", help="client properties (Kafka's format) for the connection")


def client_config(args, extra: dict | None = None) -> dict:
    conf = read_properties(getattr(args, "command_config", None))
    if getattr(args, "bootstrap_server", None):
        conf["bootstrap.servers"] = check_bootstrap(args.bootstrap_server)
    conf.update(extra or {})
    # librdkafka logs every refused connection on stderr; the tools say what failed in one line.
    conf.setdefault("logger", _SILENT)
    if "bootstrap.servers" not in conf:
        raise ToolError("no bootstrap.servers: give --bootstrap-server")
    return conf


_SILENT = logging.getLogger("kraft.tools.librdkafka")
_SILENT.addHandler(logging.NullHandler())
_SILENT.propagate = False


def admin(args):
    from confluent_kafka.admin import AdminClient
    conf = client_config(args)
    try:
        return AdminClient(conf)
    except Exception as exc:  # confluent-kafka refuses unknown properties here
        raise ToolError(f"client configuration: {exc}") from None


def wait(future, timeout_s: float = DEFAULT_TIMEOUT_S):
    """A confluent-kafka future's result, or a ToolError naming Kafka's error."""
    from confluent_kafka import KafkaException
    try:
        return future.result(timeout=timeout_s)
    except KafkaException as exc:
        err = exc.args[0] if exc.args else exc
        name = err.name() if hasattr(err, "name") else type(exc).__name__
        text = err.str() if hasattr(err, "str") else str(exc)
        raise ToolError(f"{name}: {text}") from None
    except TimeoutError:
        raise ToolError(f"no answer from the cluster within {timeout_s:.0f} s") from None
    except Exception as exc:  # concurrent.futures.TimeoutError on older Pythons
        if type(exc).__name__ == "TimeoutError":
            raise ToolError(f"no answer from the cluster within {timeout_s:.0f} s") from None
        raise


def cluster_metadata(adm, topic: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S):
    from confluent_kafka import KafkaException
    try:
        return adm.list_topics(topic=topic, timeout=timeout_s)
    except KafkaException as exc:
        raise ToolError(f"no metadata from the cluster: {exc.args[0].str() if exc.args else exc}") from None
