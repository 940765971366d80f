"""Broker-level config definitions: the configs Kafka lets a cluster change at run time
(``DynamicBrokerConfig``: per broker, resource name "<id>", or cluster-wide, resource name ""),
with Kafka's update mode and what kraft does with each (``Status``), the read-only configs
Kafka refuses to change at run time, and the validation of a change to a broker resource.

Kafka validates a broker config change on the broker that receives it (``ConfigAdminManager``)
and answers INVALID_REQUEST for anything its ``DynamicBrokerConfig.validateConfigs`` rejects (a
read-only config, a bad value, a per-broker config at the cluster default; KAFKA-13609 keeps that
code). kraft runs the same checks in the controller, so a change forwarded from any broker gets
them, and then refuses with INVALID_CONFIG what it cannot honour: a ``Status.REFUSED`` config,
a per-listener ``listener.name.<l>.<config>`` (kraft's listeners are PLAINTEXT with no
per-listener settings) and names it does not know (Kafka keeps those for plugins; kraft loads
none). Pure data and functions, like ``config_defs``.
"""

from __future__ import annotations

import re

from kraft.errors import ConfigError, InvalidRequestError
from kraft.metadata.config_defs import (INT_MAX, LONG_MAX, TOPIC_CONFIGS, TOPIC_SYNONYMS, ConfigDef, ConfigType,
                                        Mode, Status, at_least)

T, S, M = ConfigType, Status, Mode


def _topic_default(topic_name: str, broker_name: str, default: str | None, type_=None, validator=None,
                   mode: str = M.CLUSTER_WIDE) -> ConfigDef:
    """The broker default of a topic config: its type, validator and fate, under the broker name."""
    topic = TOPIC_CONFIGS[topic_name]
    if mode == M.READ_ONLY:
        status, note = S.READ_ONLY, f"a synonym of {topic_name} read from server.properties only (as in Kafka)"
    else:
        status, note = topic.status, f"default of {topic_name}: {topic.note}"
    return ConfigDef(broker_name, type_ or topic.type, default, validator or topic.validator,
                     f"The broker default for {topic_name}: {topic.doc}", status, note, topic.refuse, mode,
                     "" if validator is not None else topic.valid)


def _refused(names, type_, default, note: str, mode: str = M.CLUSTER_WIDE, validator=None) -> list:
    return [ConfigDef(n, type_, default, validator, note, S.REFUSED, note, mode=mode) for n in names]


def _read_only(name: str, type_, default: str | None, doc: str) -> ConfigDef:
    return ConfigDef(name, type_, default, None, doc, S.READ_ONLY, "set in server.properties; a restart applies it",
                     mode=M.READ_ONLY)


_SECONDARY = ("log.roll.hours", "log.roll.jitter.hours", "log.retention.minutes", "log.retention.hours",
              "log.flush.scheduler.interval.ms")
_THREADS = "kraft serves requests on one event loop; its worker counts are fixed at start-up"
_CLEANER = "kraft's log cleaner reads it from server.properties at start-up (no change at run time)"
_TLS = ("dynamic update refused: kraft reads the ssl.* settings (PEM, PKCS12 stores; JKS refused with how to convert; "
        "ssl.client.auth, ssl.enabled.protocols, ssl.cipher.suites, DEFAULT ssl.principal.mapping.rules), "
        "also as listener.name.<listener>.ssl.*, and SASL PLAIN and SCRAM-SHA-256/512 (sasl.enabled.mechanisms, "
        "[listener.name.<listener>.plain.]sasl.jaas.config; SCRAM credentials in the metadata log) from "
        "server.properties at start, except a listener's keystore, which listener.name.<listener>.ssl.keystore.* "
        "replaces per broker at run time; GSSAPI and OAUTHBEARER are not implemented")
_TIERED = "kraft has no tiered storage"
_GSSAPI = "kept: it tunes GSSAPI or OAUTHBEARER logins, which kraft does not offer (Kafka too ignores it without them)"
_THROTTLE = "kraft does not throttle moves between log directories"

_DYNAMIC = [
    # the broker defaults of topic configs: only each topic config's first synonym is dynamic
    *(_topic_default(topic, names[0][0], TOPIC_CONFIGS[topic].default)
      for topic, names in TOPIC_SYNONYMS.items()
      if topic not in ("segment.ms", "segment.jitter.ms", "retention.ms", "flush.ms")),
    # Kafka gives the *.ms forms no default: the hours (or scheduler interval) form supplies it.
    _topic_default("segment.ms", "log.roll.ms", None),
    _topic_default("segment.ms", "log.roll.hours", "168", T.INT, at_least(1), M.READ_ONLY),
    _topic_default("segment.jitter.ms", "log.roll.jitter.ms", None),
    _topic_default("segment.jitter.ms", "log.roll.jitter.hours", "0", T.INT, at_least(0), M.READ_ONLY),
    _topic_default("retention.ms", "log.retention.ms", None),
    _topic_default("retention.ms", "log.retention.minutes", None, T.INT, None, M.READ_ONLY),
    _topic_default("retention.ms", "log.retention.hours", "168", T.INT, None, M.READ_ONLY),
    _topic_default("flush.ms", "log.flush.interval.ms", None),
    _topic_default("flush.ms", "log.flush.scheduler.interval.ms", str(LONG_MAX), None, None, M.READ_ONLY),
    ConfigDef("max.connections.per.ip", T.INT, str(INT_MAX), at_least(0),
              "The maximum number of connections allowed from each ip address.", S.APPLIED,
              "caps new connections from one address on every client listener", mode=M.CLUSTER_WIDE,
              valid="[0,...]"),
    *_refused(["max.connections.per.ip.overrides"], T.STRING, "",
              "kraft resolves the per-address overrides at start-up only (set them in server.properties)"),
    *_refused(["max.connections", "max.connection.creation.rate"], T.INT, str(INT_MAX),
              "kraft limits connections per address only (max.connections.per.ip)", validator=at_least(0)),
    *_refused(["num.network.threads"], T.INT, "3", _THREADS, validator=at_least(1)),
    *_refused(["num.io.threads"], T.INT, "8", _THREADS, validator=at_least(1)),
    *_refused(["background.threads"], T.INT, "10", _THREADS, validator=at_least(1)),
    *_refused(["num.recovery.threads.per.data.dir"], T.INT, "2", _THREADS, validator=at_least(1)),
    *_refused(["num.replica.fetchers"], T.INT, "1", _THREADS),
    *_refused(["log.cleaner.threads"], T.INT, "1", _CLEANER, validator=at_least(0)),
    *_refused(["log.cleaner.dedupe.buffer.size"], T.LONG, str(128 * 1024 * 1024), _CLEANER),
    *_refused(["log.cleaner.io.buffer.load.factor"], T.DOUBLE, "0.9", _CLEANER),
    *_refused(["log.cleaner.io.buffer.size"], T.INT, str(512 * 1024), _CLEANER, validator=at_least(0)),
    *_refused(["log.cleaner.io.max.bytes.per.second"], T.DOUBLE, "1.7976931348623157E308", _CLEANER),
    *_refused(["log.cleaner.backoff.ms"], T.LONG, "15000", _CLEANER, validator=at_least(0)),
    *_refused(["metric.reporters"], T.LIST, "", "kraft loads no metrics reporter plugins "
              "(its metrics endpoint is kraft.metrics.port)"),
    *_refused(["producer.id.expiration.ms"], T.INT, "86400000", "kraft reads it at start-up only",
              validator=at_least(1)),
    _read_only("transaction.partition.verification.enable", T.BOOLEAN, "true",
               "Whether a partition leader asks the transaction coordinator that a transactional produce belongs "
               "to an ongoing transaction before appending its first batch there (KIP-890 part 1)."),
    ConfigDef("leader.replication.throttled.rate", T.LONG, str(LONG_MAX), at_least(0),
              "A long representing the upper bound (bytes/sec) on replication traffic for leaders enumerated in "
              "the property leader.replication.throttled.replicas (for each topic).", S.APPLIED,
              "bounds what this broker serves of throttled partitions to followers that are not in sync",
              mode=M.CLUSTER_WIDE, valid="[0,...]"),
    ConfigDef("follower.replication.throttled.rate", T.LONG, str(LONG_MAX), at_least(0),
              "A long representing the upper bound (bytes/sec) on replication traffic for followers enumerated "
              "in the property follower.replication.throttled.replicas (for each topic).", S.APPLIED,
              "bounds what this broker fetches of throttled partitions while its replica is not in sync",
              mode=M.CLUSTER_WIDE, valid="[0,...]"),
    *_refused(["replica.alter.log.dirs.io.max.bytes.per.second"], T.LONG, str(LONG_MAX), _THROTTLE,
              validator=at_least(0)),
    *_refused(["remote.log.index.file.cache.total.size.bytes", "remote.log.manager.copy.max.bytes.per.second",
               "remote.log.manager.fetch.max.bytes.per.second"], T.LONG, None, _TIERED),
    *_refused(["remote.fetch.max.wait.ms", "remote.list.offsets.request.timeout.ms"], T.INT, None, _TIERED),
    *_refused(["listeners", "advertised.listeners", "listener.security.protocol.map"], T.STRING, None,
              "kraft changes its listeners only at a restart", M.PER_BROKER),
    *_refused(["ssl.keystore.password", "ssl.key.password", "ssl.truststore.password", "sasl.jaas.config"],
              T.PASSWORD, None, _TLS, M.PER_BROKER),
    *_refused(["ssl.keystore.type", "ssl.keystore.location", "ssl.truststore.type", "ssl.truststore.location",
               "ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.truststore.certificates", "ssl.protocol",
               "ssl.provider", "ssl.cipher.suites", "ssl.enabled.protocols", "ssl.keymanager.algorithm",
               "ssl.trustmanager.algorithm", "ssl.endpoint.identification.algorithm",
               "ssl.secure.random.implementation", "ssl.client.auth", "ssl.engine.factory.class",
               "principal.builder.class", "sasl.mechanism.inter.broker.protocol", "sasl.enabled.mechanisms"],
              T.STRING, None, _TLS, M.PER_BROKER),
    # Kafka takes these per broker at run time (librdkafka's admin test alters one) and uses them
    # only while GSSAPI or OAUTHBEARER is enabled; kraft offers neither (sasl.enabled.mechanisms
    # refuses them), so they are what they are in a Kafka without those mechanisms: kept, unused.
    *[ConfigDef(n, t, d, None, doc, S.ACCEPTED, _GSSAPI, mode=M.PER_BROKER) for n, t, d, doc in [
        ("sasl.kerberos.service.name", T.STRING, None, "The Kerberos principal name that Kafka runs as."),
        ("sasl.kerberos.kinit.cmd", T.STRING, "/usr/bin/kinit", "Kerberos kinit command path."),
        ("sasl.kerberos.ticket.renew.window.factor", T.DOUBLE, "0.8", "Ticket renewal point (fraction of its life)."),
        ("sasl.kerberos.ticket.renew.jitter", T.DOUBLE, "0.05", "Random jitter added to the renewal time."),
        ("sasl.kerberos.min.time.before.relogin", T.LONG, "60000", "Login thread sleep time between refreshes."),
        ("sasl.kerberos.principal.to.local.rules", T.LIST, "DEFAULT", "Principal-to-short-name rules."),
        ("sasl.login.refresh.window.factor", T.DOUBLE, "0.8", "OAUTHBEARER credential refresh point."),
        ("sasl.login.refresh.window.jitter", T.DOUBLE, "0.05", "Jitter added to the refresh point."),
        ("sasl.login.refresh.min.period.seconds", T.SHORT, "60", "Minimum time between refreshes."),
        ("sasl.login.refresh.buffer.seconds", T.SHORT, "300", "Time kept before expiry when refreshing."),
    ]],
]

_READ_ONLY = [
    _read_only("auto.create.topics.enable", T.BOOLEAN, "true", "Enable auto creation of topics."),
    _read_only("auto.leader.rebalance.enable", T.BOOLEAN, "true", "Move leadership back to preferred replicas."),
    _read_only("authorizer.class.name", T.STRING, "", "The authorizer: empty (no authorization) or "
               "org.apache.kafka.metadata.authorizer.StandardAuthorizer."),
    _read_only("allow.everyone.if.no.acl.found", T.BOOLEAN, "false",
               "With an authorizer: allow an operation on a resource that has no ACL at all."),
    _read_only("super.users", T.STRING, "", "With an authorizer: principals allowed everything, separated by ';'."),
    _read_only("broker.heartbeat.interval.ms", T.INT, "2000", "Time between broker heartbeats."),
    _read_only("broker.id", T.INT, "-1", "The broker id (node.id in KRaft)."),
    _read_only("broker.rack", T.STRING, None, "Rack of the broker."),
    _read_only("replica.selector.class", T.CLASS, None, "KIP-392: which replica a consumer fetches from. "
               "org.apache.kafka.common.replica.RackAwareReplicaSelector sends a consumer with client.rack to an "
               "in-sync replica in its rack; empty or LeaderSelector: the leader."),
    _read_only("broker.session.timeout.ms", T.INT, "9000", "Broker lease length."),
    _read_only("connection.failed.authentication.delay.ms", T.INT, "100",
               "Delay before a connection whose authentication failed is closed."),
    _read_only("connections.max.idle.ms", T.LONG, "600000", "Idle connections are closed after this."),
    _read_only("controller.listener.names", T.STRING, None, "The listeners the controller uses."),
    _read_only("controller.quorum.bootstrap.servers", T.LIST, "", "Controller quorum bootstrap addresses."),
    _read_only("controller.quorum.voters", T.LIST, "", "The static controller quorum."),
    _read_only("default.replication.factor", T.INT, "1", "Default replication factor of new topics."),
    _read_only("delete.topic.enable", T.BOOLEAN, "true", "Enables deleting topics."),
    _read_only("inter.broker.listener.name", T.STRING, None, "The listener brokers use between themselves."),
    _read_only("replication.quota.window.num", T.INT, "11",
               "The number of samples to retain in memory for replication quotas."),
    _read_only("replication.quota.window.size.seconds", T.INT, "1",
               "The time span of each sample for replication quotas."),
    _read_only("connections.max.reauth.ms", T.LONG, "0", "The SASL session lifetime after which a client must "
               "re-authenticate (KIP-368); 0: sessions do not expire. Per listener as "
               "listener.name.<listener>.connections.max.reauth.ms."),
    _read_only("log.dir", T.STRING, "/tmp/kafka-logs", "The directory in which the log data is kept."),
    _read_only("log.dirs", T.STRING, None, "The directories in which the log data is kept."),
    _read_only("log.flush.offset.checkpoint.interval.ms", T.INT, "60000", "How often offset checkpoints are written."),
    _read_only("log.retention.check.interval.ms", T.LONG, "300000", "How often retention runs."),
    _read_only("metadata.log.dir", T.STRING, None, "The directory of the metadata log."),
    _read_only("metadata.log.segment.bytes", T.INT, str(1 << 30), "Segment size of the metadata log."),
    _read_only("metadata.max.retention.bytes", T.LONG, str(100 * 1024 * 1024), "Metadata log retention by size."),
    _read_only("metadata.max.retention.ms", T.LONG, "604800000", "Metadata log retention by time."),
    _read_only("quota.window.num", T.INT, "11", "The number of samples a client quota rate is measured over."),
    _read_only("quota.window.size.seconds", T.INT, "1", "The time span of each sample for client quotas."),
    _read_only("node.id", T.INT, "-1", "The node id of this server."),
    _read_only("num.partitions", T.INT, "1", "Default number of partitions of new topics."),
    _read_only("process.roles", T.LIST, "", "The roles of this server."),
    _read_only("queued.max.requests", T.INT, "500", "Requests read from one connection and not yet answered."),
    _read_only("replica.fetch.max.bytes", T.INT, "1048576", "Bytes a follower fetches per partition."),
    _read_only("replica.lag.time.max.ms", T.LONG, "30000", "A follower this far behind leaves the ISR."),
    _read_only("socket.request.max.bytes", T.INT, str(100 * 1024 * 1024), "The largest request accepted."),
    # The group coordinator (Kafka's GroupCoordinatorConfig): read at start-up.
    _read_only("group.initial.rebalance.delay.ms", T.INT, "3000", "How long the first rebalance of an empty "
               "group waits for more members."),
    _read_only("group.min.session.timeout.ms", T.INT, "6000", "The smallest session timeout a member may ask."),
    _read_only("group.max.session.timeout.ms", T.INT, "1800000", "The largest session timeout a member may ask."),
    _read_only("group.max.size", T.INT, str(INT_MAX), "The most members a classic group may have."),
    _read_only("group.consumer.heartbeat.interval.ms", T.INT, "5000", "The heartbeat interval KIP-848 consumer "
               "group members are given."),
    _read_only("group.consumer.session.timeout.ms", T.INT, "45000", "How long a KIP-848 consumer group member "
               "stays without a heartbeat."),
    _read_only("group.consumer.max.size", T.INT, str(INT_MAX), "The most members a consumer group may have."),
    _read_only("group.consumer.min.session.timeout.ms", T.INT, "45000", "The smallest consumer.session.timeout.ms "
               "a group may be given."),
    _read_only("group.consumer.max.session.timeout.ms", T.INT, "60000", "The largest consumer.session.timeout.ms "
               "a group may be given."),
    _read_only("group.consumer.min.heartbeat.interval.ms", T.INT, "5000", "The smallest "
               "consumer.heartbeat.interval.ms a group may be given."),
    _read_only("group.consumer.max.heartbeat.interval.ms", T.INT, "15000", "The largest "
               "consumer.heartbeat.interval.ms a group may be given."),
    _read_only("group.consumer.assignors", T.LIST, "uniform,range", "The server-side assignors of consumer "
               "groups; the first is the default."),
    _read_only("group.consumer.migration.policy", T.STRING, "bidirectional", "Online conversions between "
               "classic and consumer groups: disabled, upgrade, downgrade or bidirectional."),
    _read_only("offset.metadata.max.bytes", T.INT, "4096", "The largest metadata string of a committed offset."),
    _read_only("offsets.commit.timeout.ms", T.INT, "5000", "How long a commit waits for its replicas."),
    _read_only("group.coordinator.append.linger.ms", T.INT, "5", "How long the group coordinator lets writes "
               "accumulate into one batch before appending it (transactional writes are not held back)."),
    _read_only("offsets.retention.check.interval.ms", T.LONG, "600000", "How often expired offsets are removed."),
    _read_only("offsets.retention.minutes", T.INT, "10080", "How long the offsets of a group without members "
               "are kept."),
    _read_only("offsets.topic.num.partitions", T.INT, "50", "Partitions of __consumer_offsets at its creation."),
    _read_only("offsets.topic.replication.factor", T.INT, "3", "Replication factor of __consumer_offsets at its "
               "creation (not capped by the live brokers)."),
    _read_only("offsets.topic.segment.bytes", T.INT, str(100 * 1024 * 1024), "Segment size of "
               "__consumer_offsets."),
    _read_only("transaction.state.log.num.partitions", T.INT, "50", "Partitions of __transaction_state at its "
               "creation."),
    _read_only("transaction.state.log.replication.factor", T.SHORT, "3", "Replication factor of "
               "__transaction_state at its creation."),
    _read_only("transaction.state.log.min.isr", T.INT, "2", "min.insync.replicas of __transaction_state."),
    _read_only("transaction.state.log.segment.bytes", T.INT, str(100 * 1024 * 1024), "Segment size of "
               "__transaction_state."),
    _read_only("transaction.max.timeout.ms", T.INT, "900000", "The largest transaction.timeout.ms a producer "
               "may ask for."),
    _read_only("transactional.id.expiration.ms", T.INT, "604800000", "How long a transactional id without "
               "a transaction is kept."),
    _read_only("transaction.abort.timed.out.transaction.cleanup.interval.ms", T.INT, "10000", "How often "
               "transactions past their timeout are aborted."),
    _read_only("transaction.remove.expired.transaction.cleanup.interval.ms", T.INT, "3600000", "How often "
               "expired transactional ids are removed."),
]

#: Broker configs DescribeConfigs lists and AlterConfigs knows, by name.
BROKER_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in _DYNAMIC + _READ_ONLY}
del T, S, M

#: broker config -> the names of its synonym group in priority order (Kafka's
#: ``DynamicBrokerConfig.brokerConfigSynonyms``); a config outside any group is its own group.
_BROKER_GROUPS = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)
BROKER_SYNONYM_GROUPS: dict[str, tuple] = {name: group for group in _BROKER_GROUPS for name in group}
#: ``listener.name.<listener>.<config>`` (Kafka's ``ListenerConfigRegex``)
LISTENER_CONFIG = re.compile(r"listener\.name\.[^.]*\.(.*)")
LISTENER_NOTE = ("kraft reads per-listener ssl.* settings from server.properties at start; at run time it "
                 "updates only a listener's keystore (listener.name.<listener>.ssl.keystore.*, per broker)")
#: a listener's keystore, which a broker reloads when its per-broker dynamic config changes (cert rotation)
KEYSTORE_KEYS = frozenset({"ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
                           "ssl.keystore.certificate.chain", "ssl.keystore.key"})
#: listener configs Kafka lets the cluster default set (``ClusterLevelListenerConfigs``)
_CLUSTER_LEVEL_LISTENER = frozenset({"max.connections", "max.connection.creation.rate", "num.network.threads"})
#: security configs Kafka updates only with a listener prefix (``DynamicSecurityConfigs``)
_LISTENER_ONLY = frozenset({"ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
                            "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
                            "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.certificates"})


def broker_synonyms(name: str) -> tuple:
    return BROKER_SYNONYM_GROUPS.get(name, (name,))


def _scala_set(names) -> str:
    return "Set(" + ", ".join(sorted(names)) + ")"


def _per_broker_only(name: str) -> bool:
    listener = LISTENER_CONFIG.fullmatch(name)
    if listener:
        return listener.group(1) not in _CLUSTER_LEVEL_LISTENER
    definition = BROKER_CONFIGS.get(name)
    return definition is not None and definition.mode == Mode.PER_BROKER


def validate_broker_configs(changes: dict, per_broker: bool) -> None:
    """A change to one broker resource (name -> new string, None: deleted): Kafka's
    ``DynamicBrokerConfig.validateConfigs`` over the keys set (InvalidRequestError, Kafka's
    wording), then kraft's refusals (ConfigError, INVALID_CONFIG)."""
    setting = {k: v for k, v in changes.items() if v is not None}
    read_only = [k for k in setting if k in BROKER_CONFIGS and BROKER_CONFIGS[k].read_only]
    if read_only:
        raise InvalidRequestError(f"Cannot update these configs dynamically: {_scala_set(read_only)}")
    unprefixed = [k for k in setting if k in _LISTENER_ONLY]
    if unprefixed:
        raise InvalidRequestError("These security configs can be dynamically updated only per-listener using the "
                                  f"listener prefix: {_scala_set(unprefixed)}")
    parsed = {}
    for name, text in setting.items():
        listener = LISTENER_CONFIG.fullmatch(name)
        definition = BROKER_CONFIGS.get(listener.group(1) if listener else name)
        if definition is not None:
            try:
                parsed[name] = definition.check(text)
            except ConfigError as e:
                raise InvalidRequestError(str(e).replace(f"configuration {definition.name}:",
                                                         f"configuration {name}:")) from None
    if not per_broker:
        only_per_broker = [k for k in setting if _per_broker_only(k)]
        if only_per_broker:
            raise InvalidRequestError("Cannot update these configs at default cluster level, broker id must be "
                                      f"specified: {_scala_set(only_per_broker)}")
    for name, text in setting.items():
        listener = LISTENER_CONFIG.fullmatch(name)
        if listener and listener.group(1) in KEYSTORE_KEYS:
            continue  # per broker (checked above); the broker loads and checks the store itself
        if listener:
            raise ConfigError(f"Configuration {name} is not supported by kraft: {LISTENER_NOTE}")
        definition = BROKER_CONFIGS.get(name)
        if definition is None:
            raise ConfigError(f"Unknown broker config name: {name} (kraft loads no plugins that read custom configs)")
        reason = definition.refusal(text, parsed[name])
        if reason:
            raise ConfigError(reason)


__all__ = ["BROKER_CONFIGS", "BROKER_SYNONYM_GROUPS", "KEYSTORE_KEYS", "LISTENER_CONFIG", "LISTENER_NOTE",
           "broker_synonyms",
           "validate_broker_configs"]
