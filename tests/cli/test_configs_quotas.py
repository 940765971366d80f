"""``kraft configs`` for client quotas without a cluster: Kafka's ConfigCommand output lines,
Java's Double.toString for values, and the refusals that happen before any request (quota
and SCRAM keys mixed for users, unknown keys, SCRAM keys for clients)."""

from __future__ import annotations

import pytest

from kraft.cli import main
from kraft.cli.configs_quotas import describe_lines, java_double
from kraft.protocol.messages.client_quotas import DescribeClientQuotasResponse, EntityData

R = DescribeClientQuotasResponse


def test_describe_lines_are_kafkas():
    def entry(entity, **values):
        return R.Entry(entity=[EntityData(entity_type=t, entity_name=n) for t, n in entity],
                       values=[R.Entry.Value(key=k, value=v) for k, v in values.items()])
    resp = R(entries=[entry([("client-id", "flood")], producer_byte_rate=1048576.0),
                      entry([("client-id", "c"), ("user", "alice")], consumer_byte_rate=2e7, request_percentage=12.5),
                      entry([("user", None)], producer_byte_rate=10.0)])
    assert describe_lines(resp) == [
        "Quota configs for client-id 'flood' are producer_byte_rate=1048576.0",
        "Quota configs for the default user-principal are producer_byte_rate=10.0",
        "Quota configs for user-principal 'alice', client-id 'c' are consumer_byte_rate=2.0E7, request_percentage=12.5"]


@pytest.mark.parametrize("value,text", [(1048576.0, "1048576.0"), (1e7, "1.0E7"), (0.001, "0.001"),
                                        (1.5e-4, "1.5E-4"), (123456789.0, "1.23456789E8")])
def test_java_double(value, text):
    assert java_double(value) == text


@pytest.mark.parametrize("args,message", [
    (["--entity-type", "users", "--entity-name", "bob", "--add-config",
      "producer_byte_rate=1024,SCRAM-SHA-512=[password=x]"],
     "Cannot alter both quota and SCRAM credential configs simultaneously for 'users' using --bootstrap-server."),
    (["--entity-type", "users", "--entity-default", "--add-config", "SCRAM-SHA-512=[password=x]"],
     "The use of --entity-default or --user-defaults is not allowed with User SCRAM Credentials"),
    (["--entity-type", "clients", "--entity-name", "c", "--add-config", "SCRAM-SHA-512=[password=x]"],
     "Only quota configs can be added for 'clients' using --bootstrap-server."),
    (["--entity-type", "users", "--entity-name", "bob", "--delete-config", "retention.ms"],
     "Only quota and SCRAM credential configs can be deleted for 'users'"),
    (["--entity-type", "clients", "--add-config", "producer_byte_rate=1"],
     "--entity-type clients needs --entity-name or --entity-default"),
    (["--entity-type", "clients", "--entity-name", "c", "--add-config", "producer_byte_rate=fast"],
     "--add-config: producer_byte_rate takes a number, not 'fast'"),
])
def test_refusals_happen_before_any_request(args, message, capsys):
    assert main(["configs", "--bootstrap-server", "127.0.0.1:1", "--alter", *args]) == 1
    assert message in capsys.readouterr().err
