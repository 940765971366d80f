"""kraft/config.py: Java ``.properties`` syntax (java.util.Properties.load) and
``NodeConfig.from_properties`` validation with Kafka's KRaft cross-checks (KafkaConfig),
defaults from REFERENCE.md section 6, and errors that name the offending key."""

from __future__ import annotations

import pytest

from kraft.config import INT_SETTINGS, Endpoint, NodeConfig, VoterAddress, load_properties, parse_properties
from kraft.errors import ConfigError

# --- .properties syntax ------------------------------------------------------------------------


@pytest.mark.parametrize("text,expected", [
    ("a=b", {"a": "b"}),
    ("a:b", {"a": "b"}),
    ("a b", {"a": "b"}),
    ("a\tb", {"a": "b"}),
    ("a = b", {"a": "b"}),
    ("a \t: \t b", {"a": "b"}),
    ("a:=b", {"a": "=b"}),  # only the first separator is consumed
    ("a==b", {"a": "=b"}),
    ("a  b  c", {"a": "b  c"}),
    ("   a=b", {"a": "b"}),  # leading whitespace of a line
    ("a=b  ", {"a": "b  "}),  # trailing whitespace of a value is kept
    ("a=", {"a": ""}),
    ("a", {"a": ""}),
    ("=b", {"": "b"}),
    ("a=b=c:d", {"a": "b=c:d"}),
    ("a=1\na=2", {"a": "2"}),  # the last definition wins
    ("a=1\r\nb=2\rc=3", {"a": "1", "b": "2", "c": "3"}),
], ids=repr)
def test_separators_and_whitespace(text, expected):
    assert parse_properties(text) == expected


@pytest.mark.parametrize("text,expected", [
    ("# comment\na=b", {"a": "b"}),
    ("! comment\na=b", {"a": "b"}),
    ("   # indented comment\na=b", {"a": "b"}),
    ("a=b # not a comment", {"a": "b # not a comment"}),
    ("#a=b", {}),
    ("\n\n   \n", {}),
    ("# comment ending in a backslash \\\na=b", {"a": "b"}),  # comments do not continue
], ids=repr)
def test_comments_and_blank_lines(text, expected):
    assert parse_properties(text) == expected


@pytest.mark.parametrize("text,expected", [
    ("a=b\\\n  c", {"a": "bc"}),  # continuation; leading whitespace of the next line dropped
    ("a=b\\\\\nc=d", {"a": "b\\", "c": "d"}),  # even number of backslashes: no continuation
    ("a=b\\\\\\\n  c", {"a": "b\\c"}),  # three: an escaped backslash, then a continuation
    ("a=one,\\\n    two,\\\n    three", {"a": "one,two,three"}),
    ("a=b\\\n# not a comment", {"a": "b# not a comment"}),
    ("a=b\\\n\nc=d", {"a": "b", "c": "d"}),  # an empty continuation line ends the logical line
    ("a=b\\", {"a": "b"}),  # a backslash at end of input is dropped
    ("ke\\\n  y=v", {"key": "v"}),
], ids=repr)
def test_continuation_lines(text, expected):
    assert parse_properties(text) == expected


@pytest.mark.parametrize("text,expected", [
    ("a=x\\ty\\nz\\r\\f", {"a": "x\ty\nz\r\f"}),
    ("a=\\u0041\\u00e9\\u20AC", {"a": "Aé€"}),
    ("\\u0041=1", {"A": "1"}),
    ("a\\=b=c", {"a=b": "c"}),
    ("a\\:b:c", {"a:b": "c"}),
    ("a\\ b c", {"a b": "c"}),
    ("a=\\\\server\\\\share", {"a": "\\server\\share"}),
    ("a=\\q", {"a": "q"}),  # an unknown escape drops the backslash
    ("a=\\#x", {"a": "#x"}),
], ids=repr)
def test_escapes(text, expected):
    assert parse_properties(text) == expected


@pytest.mark.parametrize("sep", ["\x0c", "\x0b", "\x1c", "\x85", "\u2028"], ids=repr)
def test_only_cr_and_lf_end_a_line(sep):
    assert parse_properties(f"a=x{sep}y\nb=1") == {"a": f"x{sep}y", "b": "1"}


def test_a_lone_backslash_line_continues_into_the_next_line():
    assert parse_properties("\\\n#x=1") == {"#x": "1"}


def test_load_properties_reads_utf8_and_reports_bad_files(tmp_path):
    p = tmp_path / "s.properties"
    p.write_text("name=caf\u00e9\n", encoding="utf-8")
    assert load_properties(str(p)) == {"name": "café"}
    with pytest.raises(ConfigError, match="missing.properties"):
        load_properties(str(tmp_path / "missing.properties"))
    p.write_bytes(b"a=\xff\xfe\n")
    with pytest.raises(ConfigError, match="UTF-8"):
        load_properties(str(p))


# --- NodeConfig ---------------------------------------------------------------------------------

BASE = {
    "process.roles": "controller",
    "node.id": "1",
    "controller.quorum.voters": "1@localhost:9093,2@localhost:9094,3@localhost:9095",
    "listeners": "CONTROLLER://localhost:9093",
    "controller.listener.names": "CONTROLLER",
    "log.dirs": "/data/kraft",
}


def cfg(**changes) -> NodeConfig:
    """BASE with ``changes`` (keys with '_' for '.'; None removes a key)."""
    props = dict(BASE)
    for k, v in changes.items():
        key = k.replace("_", ".")
        if v is None:
            props.pop(key, None)
        else:
            props[key] = v
    return NodeConfig.from_properties(props)


def test_a_minimal_controller_config():
    c = cfg()
    assert c.node_id == 1
    assert c.roles == frozenset({"controller"})
    assert c.is_controller and not c.is_broker and c.is_voter
    assert c.voters == (VoterAddress(1, "localhost", 9093), VoterAddress(2, "localhost", 9094),
                        VoterAddress(3, "localhost", 9095))
    assert c.listeners == (Endpoint("CONTROLLER", "localhost", 9093),)
    assert c.advertised_listeners == c.listeners  # defaults to listeners
    assert c.controller_listener == Endpoint("CONTROLLER", "localhost", 9093)
    assert c.log_dirs == ("/data/kraft",)
    assert c.metadata_log_dir == "/data/kraft"
    assert c.unknown == ()


REFERENCE_DEFAULTS = {  # REFERENCE.md section 6
    "controller.quorum.election.timeout.ms": 1000,
    "controller.quorum.fetch.timeout.ms": 2000,
    "controller.quorum.election.backoff.max.ms": 1000,
    "controller.quorum.request.timeout.ms": 2000,
    "controller.quorum.retry.backoff.ms": 20,
    "controller.quorum.append.linger.ms": 25,
    "metadata.log.segment.bytes": 1 << 30,
    "metadata.log.max.record.bytes.between.snapshots": 20 * (1 << 20),
    "metadata.log.max.snapshot.interval.ms": 3600000,
    "metadata.max.idle.interval.ms": 500,
    "broker.heartbeat.interval.ms": 2000,
    "broker.session.timeout.ms": 9000,
}


@pytest.mark.parametrize("key,default", REFERENCE_DEFAULTS.items(), ids=list(REFERENCE_DEFAULTS))
def test_defaults_match_kafka(key, default):
    assert cfg().int(key) == default


def test_integer_settings_are_parsed_and_kept():
    c = cfg(controller_quorum_election_timeout_ms=" 150 ", metadata_log_segment_bytes="1048576")
    assert c.int("controller.quorum.election.timeout.ms") == 150
    assert c.int("metadata.log.segment.bytes") == 1048576


def test_unknown_keys_are_kept_sorted_and_do_not_fail():
    c = NodeConfig.from_properties({**BASE, "zeta.thing": "1", "alpha.thing": "x", "num.network.threads": "3"})
    assert c.unknown == ("alpha.thing", "num.network.threads", "zeta.thing")


def test_ipv6_addresses_in_brackets():
    c = cfg(controller_quorum_voters="1@[::1]:9093,2@[fe80::1%eth0]:9094",
            listeners="CONTROLLER://[::1]:9093")
    assert c.voters[0] == VoterAddress(1, "::1", 9093)
    assert c.voters[1] == VoterAddress(2, "fe80::1%eth0", 9094)
    assert c.controller_listener == Endpoint("CONTROLLER", "::1", 9093)


def test_combined_roles_bootstrap_servers_and_directories():
    c = cfg(process_roles=" broker , controller ", listeners="PLAINTEXT://:9092,CONTROLLER://:9093",
            log_dirs="/a, /b", metadata_log_dir="/meta")
    assert c.roles == frozenset({"broker", "controller"}) and c.is_broker
    assert c.listener("PLAINTEXT") == Endpoint("PLAINTEXT", "", 9092)
    assert (c.log_dirs, c.metadata_log_dir) == (("/a", "/b"), "/meta")
    d = cfg(controller_quorum_voters=None, controller_quorum_bootstrap_servers="h1:9093, [::1]:9094")
    assert d.voters == () and d.bootstrap_servers == (("h1", 9093), ("::1", 9094))
    assert not d.is_voter


def test_broker_only_node_with_voters_elsewhere_is_valid():
    c = cfg(process_roles="broker", node_id="7", listeners="PLAINTEXT://:9092")
    assert c.is_broker and not c.is_controller and not c.is_voter
    with pytest.raises(ConfigError, match="listeners"):
        c.controller_listener  # it has no controller listener of its own


def test_log_dir_falls_back_to_kafka_default():
    assert cfg(log_dirs=None).log_dirs == ("/tmp/kafka-logs",)
    assert cfg(log_dirs=None, log_dir="/x").metadata_log_dir == "/x"


def test_from_file_applies_overrides(tmp_path):
    p = tmp_path / "server.properties"
    p.write_text("".join(f"{k}={v}\n" for k, v in BASE.items()))
    c = NodeConfig.from_file(str(p), {"controller.quorum.election.timeout.ms": "77"})
    assert c.int("controller.quorum.election.timeout.ms") == 77


# Each case: changes to BASE, and the key the error must name.
INVALID = {
    "node.id missing": (dict(node_id=None), "node.id"),
    "node.id not a number": (dict(node_id="one"), "node.id"),
    "node.id negative": (dict(node_id="-1"), "node.id"),
    "process.roles missing": (dict(process_roles=None), "process.roles"),
    "process.roles unknown": (dict(process_roles="controller,zookeeper"), "process.roles"),
    "voters: no @": (dict(controller_quorum_voters="1localhost:9093"), "controller.quorum.voters"),
    "voters: no port": (dict(controller_quorum_voters="1@localhost"), "controller.quorum.voters"),
    "voters: bad id": (dict(controller_quorum_voters="x@localhost:9093"), "controller.quorum.voters"),
    "voters: empty id": (dict(controller_quorum_voters="@localhost:9093"), "controller.quorum.voters"),
    "voters: bad port": (dict(controller_quorum_voters="1@localhost:http"), "controller.quorum.voters"),
    "voters: port range": (dict(controller_quorum_voters="1@localhost:65536"), "controller.quorum.voters"),
    "voters: bare ipv6": (dict(controller_quorum_voters="1@::1:9093"), "controller.quorum.voters"),
    "voters: duplicate id": (dict(controller_quorum_voters="1@a:9093,1@b:9094"), "controller.quorum.voters"),
    "no voters nor bootstrap": (dict(controller_quorum_voters=None), "controller.quorum.voters"),
    "bootstrap malformed": (dict(controller_quorum_voters=None, controller_quorum_bootstrap_servers="host"),
                            "controller.quorum.bootstrap.servers"),
    "listeners malformed": (dict(listeners="CONTROLLER:9093"), "listeners"),
    "listeners without port": (dict(listeners="CONTROLLER://localhost"), "listeners"),
    "listeners duplicate name": (dict(listeners="CONTROLLER://:9093,controller://:9094"), "listeners"),
    "advertised malformed": (dict(advertised_listeners="CONTROLLER//x:1"), "advertised.listeners"),
    "controller listener names missing": (dict(controller_listener_names=None), "controller.listener.names"),
    "controller listener not in listeners": (dict(listeners="PLAINTEXT://:9093"), "controller.listener.names"),
    "broker-only listens on controller listener": (dict(process_roles="broker", node_id="7"), "listeners"),
    "controller not among voters": (dict(node_id="4"), "controller.quorum.voters"),
    "voter without controller role": (dict(process_roles="broker", listeners="PLAINTEXT://:9092"),
                                      "controller.quorum.voters"),
    "heartbeat equals session timeout": (dict(broker_heartbeat_interval_ms="9000"), "broker.heartbeat.interval.ms"),
    "heartbeat above session timeout": (dict(broker_heartbeat_interval_ms="5000", broker_session_timeout_ms="3000"),
                                        "broker.heartbeat.interval.ms"),
    "security map: SASL_PLAINTEXT controller, GSSAPI": (dict(listener_security_protocol_map="CONTROLLER:SASL_PLAINTEXT"),
                                                        "sasl.mechanism.controller.protocol"),
    "security map: SASL_SSL controller, GSSAPI": (dict(listener_security_protocol_map="controller:sasl_ssl"),
                                                  "sasl.mechanism.controller.protocol"),
    "security map: unknown protocol": (dict(listener_security_protocol_map="CONTROLLER:FOO"),
                                       "listener.security.protocol.map"),
    "security map: no colon": (dict(listener_security_protocol_map="CONTROLLER"), "listener.security.protocol.map"),
    # A listener named after a protocol uses it: SASL_SSL here, with Kafka's default mechanism GSSAPI.
    "inter-broker listener named SASL_SSL without a map": (dict(listeners="CONTROLLER://:9093,SASL_SSL://:9094",
                                                                inter_broker_listener_name="SASL_SSL"),
                                                           "sasl.mechanism.inter.broker.protocol"),
}


@pytest.mark.parametrize("changes,key", INVALID.values(), ids=list(INVALID))
def test_invalid_config_raises_config_error_naming_the_key(changes, key):
    with pytest.raises(ConfigError) as info:
        cfg(**changes)
    assert key in str(info.value), f"{info.value} does not name {key}"


@pytest.mark.parametrize("key", sorted(INT_SETTINGS))
def test_every_integer_setting_rejects_text_and_values_below_its_minimum(key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        NodeConfig.from_properties({**BASE, key: "ten"})
    lo = INT_SETTINGS[key][1]
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        NodeConfig.from_properties({**BASE, key: str(lo - 1)})
    # (broker.session.timeout.ms: its minimum is below the heartbeat's, cross-checked above;
    # max.connections.per.ip: zero needs overrides, see test_connection_limits_config.py)
    if key not in ("broker.session.timeout.ms", "max.connections.per.ip"):
        assert NodeConfig.from_properties({**BASE, key: str(lo)}).int(key) == lo  # the minimum itself is fine


@pytest.mark.parametrize("changes", [dict(log_dirs=","), dict(log_dirs=None, log_dir="")], ids=repr)
def test_log_dirs_naming_no_directory_is_a_config_error(changes):
    with pytest.raises(ConfigError, match="log.dir"):
        cfg(**changes)


@pytest.mark.parametrize("key", ["node.id", "controller.quorum.election.timeout.ms", "metadata.log.segment.bytes"])
def test_int32_settings_reject_values_above_int32_max(key):
    props = {**BASE, key: "2147483648"}
    if key == "node.id":
        props["controller.quorum.voters"] = "2147483648@localhost:9093"
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        NodeConfig.from_properties(props)


def test_every_controller_listener_name_must_be_a_listener_on_a_controller():
    with pytest.raises(ConfigError, match="controller.listener.names"):
        cfg(controller_listener_names="CONTROLLER,CONTROLLER2")


def test_two_listeners_on_one_port_are_rejected():
    with pytest.raises(ConfigError, match="listeners"):
        cfg(process_roles="broker,controller", listeners="CONTROLLER://:9093,PLAINTEXT://:9093")


def test_metrics_port_must_be_a_port():
    with pytest.raises(ConfigError, match="kraft.metrics.port"):
        cfg(kraft_metrics_port="70000")


def test_only_the_standard_authorizer_is_accepted():
    """kraft has Kafka's StandardAuthorizer; any other class would be authorization that does
    not happen: refused at start, in one line."""
    assert cfg(authorizer_class_name="").values["authorizer.class.name"] == ""
    name = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    c = cfg(authorizer_class_name=name, super_users="User:admin;User:ANONYMOUS")
    assert c.values["authorizer.class.name"] == name and c.values["super.users"] == "User:admin;User:ANONYMOUS"
    assert c.values["allow.everyone.if.no.acl.found"] == "false"
    with pytest.raises(ConfigError, match="authorizer.class.name: kraft has only"):
        cfg(authorizer_class_name="kafka.security.authorizer.AclAuthorizer")
    with pytest.raises(ConfigError, match="allow.everyone.if.no.acl.found"):
        cfg(authorizer_class_name=name, allow_everyone_if_no_acl_found="yes")


def test_offsets_commit_required_acks_other_than_all_is_refused():
    """A commit is always answered once every in-sync replica holds it: -1 is accepted (the
    default), any other value would be a setting that does not take effect, so it is refused."""
    assert NodeConfig.from_properties({**BASE, "offsets.commit.required.acks": "-1"}).values[
        "offsets.commit.required.acks"] == -1
    for v in ("1", "0"):
        with pytest.raises(ConfigError, match="offsets.commit.required.acks: only -1"):
            NodeConfig.from_properties({**BASE, "offsets.commit.required.acks": v})


@pytest.mark.parametrize("name", ["auto.create.topics.enable", "allow.everyone.if.no.acl.found",
                                  "transaction.partition.verification.enable"])
def test_a_boolean_setting_that_is_neither_true_nor_false_is_refused(name):
    # Read as a string and compared with "true": a typo would silently mean false.
    with pytest.raises(ConfigError, match=f"{name}: expected true or false, got 'yes please'"):
        NodeConfig.from_properties({**BASE, name: "yes please"})
    assert NodeConfig.from_properties({**BASE, name: "TRUE"}).values[name] == "TRUE"
