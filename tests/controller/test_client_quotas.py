"""AlterClientQuotas and DescribeClientQuotas as Kafka's ClientQuotaControlManager and
ClientQuotasImage.describe answer them (``kraft.controller.client_quotas``)."""

from __future__ import annotations

import pytest

from kraft.controller.client_quotas import describe_client_quotas, handle_alter_client_quotas
from kraft.controller.result import ControllerContext
from kraft.errors import ErrorCode as E
from kraft.metadata import MetadataDelta
from kraft.metadata.image import EMPTY_IMAGE
from kraft.protocol.messages.client_quotas import (AlterClientQuotasRequest, DescribeClientQuotasRequest,
                                                   EntityData)

A = AlterClientQuotasRequest
C = DescribeClientQuotasRequest.Component


def entry(entity: dict, **ops):
    return A.Entry(entity=[EntityData(entity_type=t, entity_name=n) for t, n in entity.items()],
                   ops=[A.Entry.Op(key=k, value=0.0 if v is None else v, remove=v is None) for k, v in ops.items()])


def alter(image, *entries, validate_only=False):
    return handle_alter_client_quotas(ControllerContext(image=image, version=1, now_ms=0),
                                      A(entries=list(entries), validate_only=validate_only))


def applied(image, result):
    d = MetadataDelta(image)
    for r in result.records:
        d.replay(r)
    return d.apply()


def errors(result):
    return [(e.error_code, e.error_message) for e in result.response.entries]


def test_alter_writes_records_that_replay_into_the_image():
    r = alter(EMPTY_IMAGE, entry({"client-id": "flood"}, producer_byte_rate=1048576.0),
              entry({"user": None}, consumer_byte_rate=2e6, request_percentage=12.5))
    assert errors(r) == [(0, None), (0, None)] and r.atomic
    image = applied(EMPTY_IMAGE, r)
    assert image.client_quotas.entities == {(("client-id", "flood"),): {"producer_byte_rate": 1048576.0},
                                            (("user", None),): {"consumer_byte_rate": 2e6, "request_percentage": 12.5}}
    # the same value again writes nothing; removing a key that is not there writes nothing
    assert alter(image, entry({"client-id": "flood"}, producer_byte_rate=1048576.0, consumer_byte_rate=None)).records == []
    image = applied(image, alter(image, entry({"client-id": "flood"}, producer_byte_rate=None)))
    assert (("client-id", "flood"),) not in image.client_quotas.entities


def test_validate_only_answers_without_records():
    r = alter(EMPTY_IMAGE, entry({"user": "alice"}, producer_byte_rate=10.0), validate_only=True)
    assert errors(r) == [(0, None)] and r.records == []


@pytest.mark.parametrize("entity,ops,message", [
    ({}, {"producer_byte_rate": 1.0}, "Invalid empty client quota entity"),
    ({"group": "g"}, {"producer_byte_rate": 1.0}, "Unhandled client quota entity type: group"),
    ({"user": ""}, {"producer_byte_rate": 1.0}, "Empty user not supported"),
    ({"ip": "10.0.0.1", "user": "a"}, {"connection_creation_rate": 1.0},
     "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"),
    ({"ip": "not an address"}, {"connection_creation_rate": 1.0}, "not an address is not a valid IP or resolvable host."),
    ({"ip": "10.0.0.1"}, {"producer_byte_rate": 1.0}, "Invalid configuration key producer_byte_rate"),
    ({"client-id": "c"}, {"connection_creation_rate": 1.0}, "Invalid configuration key connection_creation_rate"),
    ({"client-id": "c"}, {"producer_byte_rate": 0.0}, "Quota producer_byte_rate must be greater than 0"),
    ({"client-id": "c"}, {"producer_byte_rate": 1.5}, "producer_byte_rate cannot be a fractional value."),
    ({"client-id": "c"}, {"producer_byte_rate": 1e30}, "Proposed value for producer_byte_rate is too large for a LONG."),
    ({"ip": None}, {"connection_creation_rate": 3e9}, "Proposed value for connection_creation_rate is too large for an INT."),
])
def test_invalid_entries_are_invalid_request_with_kafkas_message(entity, ops, message):
    r = alter(EMPTY_IMAGE, entry(entity, **ops), entry({"client-id": "ok"}, request_percentage=0.5))
    assert errors(r) == [(E.INVALID_REQUEST, message), (0, None)]
    assert [rec.entity[0].entity_name for rec in r.records] == ["ok"]  # the valid entry is still written


def test_duplicate_entity_and_duplicate_key():
    e = {"user": "a", "client-id": "c"}
    r = alter(EMPTY_IMAGE, entry(e, producer_byte_rate=5.0), entry(e, producer_byte_rate=6.0))
    assert errors(r) == [(E.INVALID_REQUEST, "Ignoring duplicate entity ClientQuotaEntity(entries={client-id=c, user=a})")]
    twice = A.Entry(entity=[EntityData(entity_type="user", entity_name="b")],
                    ops=[A.Entry.Op(key="producer_byte_rate", value=1.0), A.Entry.Op(key="producer_byte_rate", value=2.0)])
    r = alter(EMPTY_IMAGE, twice)
    assert r.response.entries[0].error_code == E.INVALID_REQUEST and r.records == []


def _image():
    return applied(EMPTY_IMAGE, alter(EMPTY_IMAGE,
                                      entry({"user": "alice"}, producer_byte_rate=1.0),
                                      entry({"user": None}, producer_byte_rate=2.0),
                                      entry({"user": "alice", "client-id": "c1"}, producer_byte_rate=3.0),
                                      entry({"client-id": "c1"}, producer_byte_rate=4.0),
                                      entry({"client-id": None}, producer_byte_rate=5.0),
                                      entry({"ip": "10.0.0.1"}, connection_creation_rate=6.0)))


def describe(components, strict=False, image=None):
    resp = describe_client_quotas(image or _image(), DescribeClientQuotasRequest(components=components, strict=strict))
    if resp.error_code:
        return resp.error_code, resp.error_message
    return sorted(v.value for e in resp.entries for v in e.values)


@pytest.mark.parametrize("components,strict,values", [
    ([], False, [1, 2, 3, 4, 5, 6]),
    ([], True, []),
    ([C(entity_type="user", match_type=0, match="alice")], False, [1, 3]),
    ([C(entity_type="user", match_type=0, match="alice")], True, [1]),
    ([C(entity_type="user", match_type=1)], True, [2]),
    ([C(entity_type="user", match_type=2)], False, [1, 2, 3]),  # the default counts as "specified", as Kafka
    ([C(entity_type="client-id", match_type=2)], True, [4, 5]),
    ([C(entity_type="user", match_type=2), C(entity_type="client-id", match_type=0, match="c1")], True, [3]),
    ([C(entity_type="ip", match_type=2)], False, [6]),
])
def test_describe_filters(components, strict, values):
    assert describe(components, strict) == values


@pytest.mark.parametrize("components,error", [
    ([C(entity_type="", match_type=2)], (E.INVALID_REQUEST, "Invalid empty entity type.")),
    ([C(entity_type="user", match_type=2), C(entity_type="user", match_type=1)],
     (E.INVALID_REQUEST, "Entity type user cannot appear more than once in the filter.")),
    ([C(entity_type="group", match_type=2)], (E.UNSUPPORTED_VERSION, "Unsupported entity type group")),
    ([C(entity_type="user", match_type=0)], (E.INVALID_REQUEST, "Request specified MATCH_TYPE_EXACT, but set match string to null.")),
    ([C(entity_type="user", match_type=1, match="x")],
     (E.INVALID_REQUEST, "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")),
    ([C(entity_type="user", match_type=7)], (E.INVALID_REQUEST, "Unknown match type 7")),
    ([C(entity_type="ip", match_type=2), C(entity_type="user", match_type=2)],
     (E.INVALID_REQUEST, "Invalid entity filter component combination. IP filter component should not be used "
                         "with user or clientId filter component.")),
])
def test_describe_refuses_bad_filters_with_kafkas_errors(components, error):
    assert describe(components) == error
