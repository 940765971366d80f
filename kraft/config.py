"""Node configuration: Kafka's ``server.properties`` names, defaults and validation.

``load_properties`` reads Java ``.properties`` syntax (comments, ``=``/``:``/space
separators, line continuations, escapes). ``NodeConfig.from_properties`` checks every
known key against its type and range and cross-checks the KRaft settings the way Kafka's
``KafkaConfig`` does, raising :class:`ConfigError` that names the key. Unknown keys are
kept and reported (Kafka warns, it does not fail). This module does no I/O beyond reading
the file it is given and must not import anything above ``kraft.errors``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kraft.errors import ConfigError
from kraft.types import Endpoint

#: the one authorizer kraft has (``kraft.metadata.authorizer``), by Kafka's class name
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

MiB = 1024 * 1024
GiB = 1024 * MiB


# --- .properties syntax ------------------------------------------------------------------

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(s: str) -> str:
    out, i = [], 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            n = s[i + 1]
            if n == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", s[i + 2 : i + 6] or ""):
                out.append(chr(int(s[i + 2 : i + 6], 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(n, n))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def parse_properties(text: str) -> dict[str, str]:
    """Java Properties.load semantics for the subset operators use."""
    props: dict[str, str] = {}
    logical, pending, continuing = [], "", False
    # Java ends lines only at \n, \r and \r\n (str.splitlines also splits at \x0b, \u2028, ...).
    for raw in re.split(r"\r\n|\r|\n", text):
        line = raw.lstrip(" \t\f")
        if not continuing and (not line or line[0] in "#!"):
            continue
        # An odd number of trailing backslashes continues the line.
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending += line[:-1]
            continuing = True
            continue
        logical.append(pending + line)
        pending, continuing = "", False
    if continuing:
        logical.append(pending)
    for line in logical:
        if not line:
            continue
        m = re.match(r"((?:\\.|[^=:\s\\])*)\s*[=:\s]?\s*(.*)$", line, re.S)
        key, value = _unescape(m.group(1)), _unescape(m.group(2))
        props[key] = value
    return props


def load_properties(path: str) -> dict[str, str]:
    try:
        with open(path, encoding="utf-8") as f:
            return parse_properties(f.read())
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {path} is not UTF-8") from exc


# --- typed values ------------------------------------------------------------------------


@dataclass(frozen=True)
class VoterAddress:
    node_id: int
    host: str
    port: int


def _int(key: str, v: str, lo: int | None = None, hi: int | None = None) -> int:
    try:
        n = int(v.strip())
    except ValueError:
        raise ConfigError(f"{key}: expected an integer, got {v!r}") from None
    if lo is not None and n < lo:
        raise ConfigError(f"{key}: must be at least {lo}, got {n}")
    if hi is not None and n > hi:
        raise ConfigError(f"{key}: must be at most {hi}, got {n}")
    return n


def _host_port(key: str, s: str) -> tuple[str, int]:
    s = s.strip()
    m = re.fullmatch(r"\[([^\]]+)\]:(\d+)|([^:\[\]]*):(\d+)", s)
    if not m:
        raise ConfigError(f"{key}: expected host:port, got {s!r}")
    host = m.group(1) or m.group(3)
    port = int(m.group(2) or m.group(4))
    if not 0 <= port <= 65535:
        raise ConfigError(f"{key}: port out of range in {s!r}")
    return host, port


def parse_voters(key: str, value: str) -> tuple[VoterAddress, ...]:
    """``id@host:port,...`` (controller.quorum.voters)."""
    voters = []
    for item in filter(None, (x.strip() for x in value.split(","))):
        ident, sep, addr = item.partition("@")
        if not sep:
            raise ConfigError(f"{key}: expected id@host:port, got {item!r}")
        host, port = _host_port(key, addr)
        voters.append(VoterAddress(_int(key, ident, 0, INT32_MAX), host, port))
    ids = [v.node_id for v in voters]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"{key}: duplicate voter id in {value!r}")
    return tuple(voters)


def parse_listeners(key: str, value: str) -> tuple[Endpoint, ...]:
    """``NAME://host:port,...``; an empty host means all interfaces."""
    out = []
    for item in filter(None, (x.strip() for x in value.split(","))):
        m = re.fullmatch(r"([A-Za-z0-9_\-]+)://(.*)", item)
        if not m:
            raise ConfigError(f"{key}: expected NAME://host:port, got {item!r}")
        host, port = _host_port(key, m.group(2))
        out.append(Endpoint(m.group(1).upper(), host, port))
    names = [e.name for e in out]
    if len(set(names)) != len(names):
        raise ConfigError(f"{key}: each listener name may appear once ({value!r})")
    ports = [e.port for e in out if e.port != 0]
    if len(set(ports)) != len(ports):
        raise ConfigError(f"{key}: each listener must have a different port ({value!r})")
    return tuple(out)


# --- the node's configuration --------------------------------------------------------------

# key: (default, min) for integer settings; defaults are Kafka's (QuorumConfig, KRaftConfigs,
# ServerConfigs, ReplicationConfigs).
INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1
#: Settings Kafka types as LONG; every other integer setting is an INT (int32).
LONG_SETTINGS = frozenset({
    "metadata.log.segment.ms", "metadata.log.max.record.bytes.between.snapshots",
    "metadata.log.max.snapshot.interval.ms", "metadata.max.retention.bytes", "metadata.max.retention.ms",
    "replica.lag.time.max.ms",
})
INT_SETTINGS: dict[str, tuple[int, int]] = {
    "controller.quorum.election.timeout.ms": (1000, 1),
    "controller.quorum.fetch.timeout.ms": (2000, 1),
    "controller.quorum.election.backoff.max.ms": (1000, 1),
    "controller.quorum.request.timeout.ms": (2000, 1),
    "controller.quorum.retry.backoff.ms": (20, 0),
    "controller.quorum.append.linger.ms": (25, 0),
    "metadata.log.segment.bytes": (1 * GiB, 12),
    "metadata.log.segment.ms": (7 * 24 * 3600 * 1000, 1),
    "metadata.log.max.record.bytes.between.snapshots": (20 * MiB, 1),
    "metadata.log.max.snapshot.interval.ms": (3600 * 1000, 0),
    "metadata.max.idle.interval.ms": (500, 0),
    "metadata.max.retention.bytes": (100 * MiB, -1),
    "metadata.max.retention.ms": (7 * 24 * 3600 * 1000, -1),
    "broker.heartbeat.interval.ms": (2000, 1),
    "broker.session.timeout.ms": (9000, 1),
    # kraft's own: a broker whose heartbeat connection closed is fenced this long after the
    # close unless it heartbeats again (at least broker.heartbeat.interval.ms + 1 s; -1: the
    # whole session, as Kafka)
    "kraft.broker.disconnected.session.timeout.ms": (3000, -1),
    "socket.request.max.bytes": (100 * MiB, 1),
    "queued.max.requests": (500, 1),
    "log.segment.bytes": (1 * GiB, 14),
    "num.partitions": (1, 1),
    "default.replication.factor": (1, 1),
    "min.insync.replicas": (1, 1),
    "replica.lag.time.max.ms": (30000, 1),
    # the follower side of partition replication (Kafka's ReplicationConfigs defaults)
    "num.replica.fetchers": (1, 1),
    "num.recovery.threads.per.data.dir": (2, 1),  # Kafka 4's default: logs opened at once at start-up
    "replica.fetch.backoff.ms": (1000, 0),
    "replica.fetch.wait.max.ms": (500, 0),
    "replica.fetch.min.bytes": (1, 1),
    "replica.fetch.max.bytes": (1048576, 0),
    "replica.fetch.response.max.bytes": (10485760, 0),
    "max.incremental.fetch.session.cache.slots": (1000, 0),  # fetch sessions (KIP-227) a broker keeps
    "kraft.metrics.port": (-1, -1),
}
STR_SETTINGS: dict[str, str] = {
    "process.roles": "",
    "controller.quorum.voters": "",
    "controller.quorum.bootstrap.servers": "",
    "listeners": "PLAINTEXT://:9092",
    "advertised.listeners": "",
    "controller.listener.names": "",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "",
    "metadata.log.dir": "",
    "log.dirs": "",
    "log.dir": "/tmp/kafka-logs",
    "unclean.leader.election.enable": "false",  # the controller elects outside the ISR only if "true"
    "transaction.partition.verification.enable": "true",  # KIP-890: verify transactional produce first
    "node.id": "",
    "kraft.metrics.host": "127.0.0.1",
    "broker.rack": "",
    "auto.create.topics.enable": "true",
    "replica.selector.class": "",  # KIP-392: empty, the leader serves every consumer
}
_SECURITY = {"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}
#: KIP-392's replica selectors kraft has: a consumer that names its rack (``client.rack``) is
#: sent to a replica in that rack by the rack-aware one; the leader selector, like no selector,
#: keeps every consumer on the leader. (Followers answer consumers' v11+ Fetches either way.)
RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
REPLICA_SELECTORS = {"": None, "org.apache.kafka.common.replica.LeaderSelector": None,
                     RACK_AWARE_SELECTOR: "rack"}

# Connection limits (Kafka's SocketServerConfigs); connections.max.idle.ms < 0 disables expiry.
INT_SETTINGS.update({"connections.max.idle.ms": (600_000, -1), "max.connections.per.ip": (INT32_MAX, 0)})
# Client quotas (Kafka's QuotaConfig): the samples a rate is measured over and each one's span.
INT_SETTINGS.update({"quota.window.num": (11, 1), "quota.window.size.seconds": (1, 1)})
# Replication quotas (kraft.broker.replication_quotas): the same, for the replication throttles.
INT_SETTINGS.update({"replication.quota.window.num": (11, 1), "replication.quota.window.size.seconds": (1, 1)})
LONG_SETTINGS = LONG_SETTINGS | {"connections.max.idle.ms"}
STR_SETTINGS["max.connections.per.ip.overrides"] = ""

# Broker log settings (Kafka's ServerLogConfigs); log.retention.ms/minutes, when set, win
# over log.retention.hours as in Kafka. -1 disables a retention rule.
INT_SETTINGS.update({
    "message.max.bytes": (1048588, 0),
    "log.retention.hours": (168, -1),
    "log.retention.bytes": (-1, -1),
    "log.retention.check.interval.ms": (300_000, 1),
    "log.flush.offset.checkpoint.interval.ms": (60_000, 0),
    # Kafka's meaning and defaults (never: Kafka trusts replication, not fsync): the most
    # messages / ms an appended record may stay unflushed. They only shorten the linger below.
    "log.flush.interval.ms": (INT64_MAX, 0),
    "log.flush.interval.messages": (INT64_MAX, 1),
    # kraft's own: partition logs are durable by group commit (fdatasync covering every
    # acks=all answer; acks=0/1 data flushed at the latest this long after its append).
    "kraft.log.flush.linger.ms": (1000, 0),
    # the log cleaner (Kafka's CleanerConfig): read at start-up
    "log.cleaner.threads": (1, 0),
    "log.cleaner.dedupe.buffer.size": (128 * MiB, 1),
    "log.cleaner.backoff.ms": (15_000, 0),
})
# The transaction coordinator and __transaction_state (Kafka's TransactionStateManagerConfig and
# TransactionLogConfig defaults).
INT_SETTINGS.update({
    "transaction.state.log.num.partitions": (50, 1),
    "transaction.state.log.replication.factor": (3, 1),
    "transaction.state.log.min.isr": (2, 1),
    "transaction.state.log.segment.bytes": (100 * MiB, 1),
    "transaction.max.timeout.ms": (900_000, 1),
    "transactional.id.expiration.ms": (7 * 24 * 3600 * 1000, 1),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (10_000, 1),
    "transaction.remove.expired.transaction.cleanup.interval.ms": (3_600_000, 1),
})
# The group coordinator and __consumer_offsets (Kafka's GroupCoordinatorConfig defaults).
INT_SETTINGS.update({
    "offsets.topic.num.partitions": (50, 1),
    "offsets.topic.replication.factor": (3, 1),
    "offsets.topic.segment.bytes": (100 * MiB, 1),
    "offsets.commit.timeout.ms": (5000, 1),
    "group.coordinator.append.linger.ms": (5, 0),
    "offsets.commit.required.acks": (-1, -1),  # only -1 (see the check in from_properties)
    "offsets.retention.minutes": (7 * 24 * 60, 1),
    "offsets.retention.check.interval.ms": (600_000, 1),
    "offset.metadata.max.bytes": (4096, 0),
    "group.initial.rebalance.delay.ms": (3000, 0),
    "group.min.session.timeout.ms": (6000, 0),
    "group.max.session.timeout.ms": (1_800_000, 0),
    "group.max.size": (INT32_MAX, 1),
    "group.consumer.heartbeat.interval.ms": (5000, 1),
    "group.consumer.session.timeout.ms": (45000, 1),
    # the bounds of the GROUP config resource's per-group values (kraft.metadata.group_config_defs)
    "group.consumer.min.session.timeout.ms": (45000, 1),
    "group.consumer.max.session.timeout.ms": (60000, 1),
    "group.consumer.min.heartbeat.interval.ms": (5000, 1),
    "group.consumer.max.heartbeat.interval.ms": (15000, 1),
    "group.consumer.max.size": (INT32_MAX, 1),
    # kraft's own: the heartbeat interval members get while their group rebalances
    "kraft.group.consumer.rebalance.heartbeat.interval.ms": (100, 1),
    # kraft's own: how often a coordinator samples its groups' lag for /metrics (0: never)
    "kraft.group.lag.interval.ms": (10_000, 0),
    # kraft's own: at most this many rows per lag gauge (the groups lagging most keep theirs)
    "kraft.group.lag.max.series": (10_000, 0),
    # kraft's own: KIP-714 client metrics pushed this often (0: the telemetry APIs are not offered)
    "kraft.client.telemetry.push.interval.ms": (30_000, 0),
})
LONG_SETTINGS = LONG_SETTINGS | {"offsets.retention.check.interval.ms"}
LONG_SETTINGS = LONG_SETTINGS | {"log.retention.bytes", "log.retention.check.interval.ms", "log.flush.interval.ms",
                                 "log.flush.interval.messages", "kraft.log.flush.linger.ms",
                                 "log.cleaner.dedupe.buffer.size", "log.cleaner.backoff.ms"}


def log_flush_linger_ms(values: dict) -> float:
    """How long partition-log appends may wait for their fdatasync: ``kraft.log.flush.linger.ms``,
    shortened by Kafka's ``log.flush.interval.ms`` when that is set lower."""
    return float(min(values["kraft.log.flush.linger.ms"], values["log.flush.interval.ms"]))


def log_flush_messages(values: dict) -> int | None:
    """Kafka's ``log.flush.interval.messages``: flush once this many offsets are unflushed
    (None: the default, no such limit)."""
    n = values["log.flush.interval.messages"]
    return None if n >= INT64_MAX else n
STR_SETTINGS.update({"log.retention.ms": "", "log.retention.minutes": "", "log.message.timestamp.type": "CreateTime"})
#: the log cleaner's I/O cap, a DOUBLE in Kafka (empty: no cap)
STR_SETTINGS["log.cleaner.io.max.bytes.per.second"] = ""
#: KIP-848 server-side assignors, the first the default (Kafka's group.consumer.assignors)
STR_SETTINGS["group.consumer.assignors"] = "uniform,range"
#: online upgrade/downgrade between classic and consumer groups: disabled, upgrade, downgrade, bidirectional
STR_SETTINGS["group.consumer.migration.policy"] = "bidirectional"


def log_retention_ms(values: dict) -> int:
    """``log.retention.ms``, else ``log.retention.minutes``, else ``log.retention.hours`` (Kafka's order)."""
    if values.get("log.retention.ms"):
        return _int("log.retention.ms", values["log.retention.ms"], -1, INT64_MAX)
    if values.get("log.retention.minutes"):
        minutes = _int("log.retention.minutes", values["log.retention.minutes"], -1, INT32_MAX)
        return -1 if minutes < 0 else minutes * 60_000
    hours = values["log.retention.hours"]
    return -1 if hours < 0 else hours * 3_600_000


def parse_connection_overrides(key: str, value: str) -> dict[str, int]:
    """``host:count,...`` (max.connections.per.ip.overrides); the count follows the last colon,
    so an IPv6 address may stand as it is."""
    out: dict[str, int] = {}
    for item in filter(None, (x.strip() for x in value.split(","))):
        host, sep, count = item.rpartition(":")
        host = host.strip().strip("[]")
        if not sep or not host:
            raise ConfigError(f"{key}: expected host:count, got {item!r}")
        out[host] = _int(key, count, 0, INT32_MAX)
    return out


@dataclass
class NodeConfig:
    """A validated ``server.properties``. Integer settings are read with :meth:`int`."""

    node_id: int
    roles: frozenset
    voters: tuple  # VoterAddress, from controller.quorum.voters (may be empty)
    bootstrap_servers: tuple  # (host, port), from controller.quorum.bootstrap.servers
    listeners: tuple  # Endpoint
    advertised_listeners: tuple
    controller_listener_names: tuple
    metadata_log_dir: str
    log_dirs: tuple
    values: dict = field(default_factory=dict)  # every setting, parsed, by Kafka name
    unknown: tuple = ()
    #: what server.properties (and overrides) set, as written: the static layer of the broker
    #: configs a topic's effective configs fall back to (``log.roll.ms``, ``compression.type``...)
    given: dict = field(default_factory=dict)

    def int(self, key: str) -> int:
        return self.values[key]

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    @property
    def is_voter(self) -> bool:
        return any(v.node_id == self.node_id for v in self.voters)

    def listener(self, name: str) -> Endpoint:
        for e in self.listeners:
            if e.name == name:
                return e
        raise ConfigError(f"listeners: no listener named {name}")

    @property
    def controller_listener(self) -> Endpoint:
        return self.listener(self.controller_listener_names[0])

    @classmethod
    def from_file(cls, path: str, overrides: dict[str, str] | None = None) -> "NodeConfig":
        props = load_properties(path)
        props.update(overrides or {})
        return cls.from_properties(props)

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> "NodeConfig":
        values: dict = {}
        for key, (default, lo) in INT_SETTINGS.items():
            hi = INT64_MAX if key in LONG_SETTINGS else INT32_MAX
            if key == "kraft.metrics.port":
                hi = 65535
            values[key] = _int(key, props[key], lo, hi) if key in props else default
        for key, default in STR_SETTINGS.items():
            values[key] = props.get(key, default).strip()
        unknown = tuple(sorted(k for k in props if k not in values and not _is_security_key(k)))

        if not values["node.id"]:
            raise ConfigError("node.id: required in KRaft mode")
        node_id = _int("node.id", values["node.id"], 0, INT32_MAX)
        roles = frozenset(r.strip() for r in values["process.roles"].split(",") if r.strip())
        if not roles:
            raise ConfigError("process.roles: required (broker, controller, or broker,controller)")
        if not roles <= {"broker", "controller"}:
            raise ConfigError(f"process.roles: unknown role in {values['process.roles']!r}")
        voters = parse_voters("controller.quorum.voters", values["controller.quorum.voters"])
        bootstrap = tuple(_host_port("controller.quorum.bootstrap.servers", s)
                          for s in values["controller.quorum.bootstrap.servers"].split(",") if s.strip())
        if not voters and not bootstrap:
            raise ConfigError("controller.quorum.voters: set it (id@host:port,...) or "
                              "controller.quorum.bootstrap.servers")
        listeners = parse_listeners("listeners", values["listeners"])
        advertised = parse_listeners("advertised.listeners", values["advertised.listeners"]) or listeners
        ctrl_names = tuple(n.strip().upper() for n in values["controller.listener.names"].split(",") if n.strip())
        if not ctrl_names:
            raise ConfigError("controller.listener.names: required in KRaft mode")
        names = {e.name for e in listeners}
        missing = [n for n in ctrl_names if n not in names]
        if "controller" in roles and missing:
            raise ConfigError(f"controller.listener.names: {', '.join(missing)} must appear in listeners "
                              f"when process.roles contains controller")
        if "controller" not in roles and set(ctrl_names) & names:
            raise ConfigError("listeners: a broker-only node must not listen on the controller listener")
        _check_security_map(values["listener.security.protocol.map"], names | set(ctrl_names))
        inter_broker = values["inter.broker.listener.name"].strip().upper()
        for name, what in [*((n, "controller listener") for n in ctrl_names), (inter_broker, "inter-broker listener")]:
            protocol = security_protocol(values, name)
            mechanism_key = ("sasl.mechanism.controller.protocol" if what == "controller listener"
                             else "sasl.mechanism.inter.broker.protocol")
            mechanism = values[mechanism_key].strip().upper()
            if protocol.startswith("SASL_") and mechanism not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
                raise ConfigError(f"{mechanism_key}: the {what} {name} is {protocol}: set PLAIN, SCRAM-SHA-256 or "
                                  f"SCRAM-SHA-512 (got {mechanism}; kraft has no GSSAPI)")
            if protocol.startswith("SASL_") and what == "controller listener" and mechanism.startswith("SCRAM"):
                # As in Kafka: SCRAM credentials live in the metadata log, which a controller
                # must reach before it could look one up.
                raise ConfigError(f"{mechanism_key}: SCRAM cannot be used on the controller listener {name} "
                                  "(its credentials are in the metadata log); use PLAIN")
        if "controller" in roles and voters and node_id not in {v.node_id for v in voters}:
            raise ConfigError(f"controller.quorum.voters: node.id {node_id} has the controller role "
                              f"but is not among the voters")
        if "controller" not in roles and node_id in {v.node_id for v in voters}:
            raise ConfigError(f"controller.quorum.voters: node.id {node_id} is a voter but "
                              f"process.roles lacks controller")
        for name in _BOOLEAN_SETTINGS:  # a typo must not silently mean false
            if values[name].strip().lower() not in ("true", "false"):
                raise ConfigError(f"{name}: expected true or false, got {values[name]!r}")
        if values["authorizer.class.name"] not in ("", STANDARD_AUTHORIZER):
            raise ConfigError(f"authorizer.class.name: kraft has only {STANDARD_AUTHORIZER} (got "
                              f"{values['authorizer.class.name']!r}); empty: no authorization, ACL requests "
                              "answered SECURITY_DISABLED, as Kafka answers them without an authorizer")
        if values["replica.selector.class"] not in REPLICA_SELECTORS:
            raise ConfigError(f"replica.selector.class: kraft has {', '.join(sorted(c for c in REPLICA_SELECTORS if c))} "
                              f"(got {values['replica.selector.class']!r}); empty: the leader serves every consumer")
        if values["offsets.commit.required.acks"] != -1:
            raise ConfigError(f"offsets.commit.required.acks: only -1 is supported (got "
                              f"{values['offsets.commit.required.acks']}): a commit is answered once every in-sync "
                              "replica holds it; Kafka 4 removed the setting (KIP-1041)")
        if values["broker.heartbeat.interval.ms"] >= values["broker.session.timeout.ms"]:
            raise ConfigError("broker.heartbeat.interval.ms: must be below broker.session.timeout.ms")
        log_dirs = tuple(d.strip() for d in (values["log.dirs"] or values["log.dir"]).split(",") if d.strip())
        if not log_dirs:
            raise ConfigError("log.dirs: no log directory given (set log.dirs or log.dir)")
        metadata_dir = values["metadata.log.dir"] or log_dirs[0]
        overrides = parse_connection_overrides("max.connections.per.ip.overrides",
                                               values["max.connections.per.ip.overrides"])
        if values["max.connections.per.ip"] == 0 and not overrides:
            raise ConfigError("max.connections.per.ip: can be zero only if max.connections.per.ip.overrides is set")
        return cls(node_id, roles, voters, bootstrap, listeners, advertised, ctrl_names, metadata_dir,
                   log_dirs, values, unknown, {k: v.strip() for k, v in props.items()})


def _security_map(spec: str) -> dict[str, str]:
    mapping = {}
    for item in filter(None, (x.strip() for x in spec.split(","))):
        name, sep, proto = item.partition(":")
        if not sep or proto.strip().upper() not in _SECURITY:
            raise ConfigError(f"listener.security.protocol.map: bad entry {item!r}")
        mapping[name.strip().upper()] = proto.strip().upper()
    return mapping


def security_protocol(values: dict, listener: str) -> str:
    """The security protocol of ``listener`` (Kafka: a listener named after a protocol
    uses it when the map does not name it)."""
    return _security_map(values["listener.security.protocol.map"]).get(
        listener, listener if listener in _SECURITY else "PLAINTEXT")


#: protocols kraft serves (SASL: mechanism PLAIN, kraft.server.sasl)
SERVED_SECURITY = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def _check_security_map(spec: str, names: set) -> None:
    mapping = _security_map(spec)
    for name in names:
        proto = mapping.get(name, name if name in _SECURITY else "PLAINTEXT")
        if proto not in SERVED_SECURITY:
            raise ConfigError(f"listener.security.protocol.map: {name} uses {proto}; "
                              f"kraft supports {', '.join(SERVED_SECURITY)} listeners only")


#: Kafka's ssl.* and sasl.* settings: read per listener by kraft.server.tls (never "unknown")
SECURITY_KEYS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.type", "ssl.truststore.location",
    "ssl.truststore.password", "ssl.truststore.certificates", "ssl.client.auth", "ssl.enabled.protocols",
    "ssl.cipher.suites", "ssl.principal.mapping.rules", "sasl.enabled.mechanisms", "sasl.jaas.config",
    "plain.sasl.jaas.config", "scram-sha-256.sasl.jaas.config", "scram-sha-512.sasl.jaas.config",
    "connections.max.reauth.ms",
    "ssl.endpoint.identification.algorithm"})
# The mechanism a node logs in with on another node's SASL listener (Kafka's defaults: GSSAPI,
# which kraft lacks: a SASL controller or inter-broker listener needs them set).
STR_SETTINGS.update({"sasl.mechanism.inter.broker.protocol": "GSSAPI", "sasl.mechanism.controller.protocol": "GSSAPI"})
# Kafka's SocketServer delays closing a connection whose authentication failed (KIP-306).
INT_SETTINGS["connection.failed.authentication.delay.ms"] = (100, 0)


def _is_security_key(key: str) -> bool:
    if key.startswith("listener.name."):
        key = key[len("listener.name."):].partition(".")[2]
    return key in SECURITY_KEYS

# Controller leadership policy (Kafka's ReplicationConfigs / KIP-966's ELR switch).
INT_SETTINGS.update({"leader.imbalance.check.interval.seconds": (300, 1),
                     "leader.imbalance.per.broker.percentage": (10, 0)})
STR_SETTINGS.update({"auto.leader.rebalance.enable": "true", "eligible.leader.replicas.enable": "false"})
# Authorization (kraft.metadata.authorizer): empty, or Kafka's StandardAuthorizer; any other
# class is refused at start rather than run without the authorization it names.
STR_SETTINGS.update({"authorizer.class.name": "", "super.users": "", "allow.everyone.if.no.acl.found": "false"})
#: string settings that are booleans: refused at start unless true or false
_BOOLEAN_SETTINGS = ("auto.create.topics.enable", "allow.everyone.if.no.acl.found",
                     "transaction.partition.verification.enable")
