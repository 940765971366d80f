"""Every registered message at every supported version survives encode -> decode -> encode.

Instances come from the schemas (protocol_samples.py), so a new schema is covered by adding it.
"""

import pytest

from kraft.errors import UnsupportedVersionError
from kraft.protocol import Request, decode_request, decode_response, encode_request, encode_response
from kraft.protocol.schema import Array, is_struct
from protocol_samples import all_messages, message_ids, sample

MESSAGES = all_messages()
IDS = message_ids(MESSAGES)
FLEXIBLE = [m for m in MESSAGES if m[0].is_flexible(m[1])]


@pytest.mark.parametrize("cls,version", MESSAGES, ids=IDS)
def test_every_field_round_trips(cls, version):
    msg = sample(cls, version)
    data = msg.encode(version)
    decoded = cls.decode(data, version)
    assert decoded == msg
    assert decoded.encode(version) == data
    assert cls.decode(bytearray(data), version) == msg
    assert cls.decode(memoryview(data), version) == msg


@pytest.mark.parametrize("cls,version", MESSAGES, ids=IDS)
def test_null_values_round_trip(cls, version):
    msg = sample(cls, version, nulls=True)
    data = msg.encode(version)
    assert cls.decode(data, version) == msg


@pytest.mark.parametrize("cls,version", MESSAGES, ids=IDS)
def test_defaults_round_trip(cls, version):
    msg = cls()
    assert cls.decode(msg.encode(version), version) == msg


@pytest.mark.parametrize("cls,version", FLEXIBLE, ids=message_ids(FLEXIBLE))
def test_unknown_tagged_fields_survive_a_round_trip(cls, version):
    msg = sample(cls, version, unknown_tags=True)
    data = msg.encode(version)
    decoded = cls.decode(data, version)
    assert decoded.unknown_tagged_fields == msg.unknown_tagged_fields
    assert decoded == msg
    assert decoded.encode(version) == data


@pytest.mark.parametrize("cls,version", MESSAGES, ids=IDS)
def test_framed_round_trip(cls, version):
    msg = sample(cls, version)
    if issubclass(cls, Request):
        frame = encode_request(msg, version, correlation_id=12345, client_id="client-é")
        header, decoded = decode_request(frame[4:])
        assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == \
            (cls.API_KEY, version, 12345, "client-é")
    else:
        frame = encode_response(-7, cls.API_KEY, version, msg)
        header, decoded = decode_response(frame[4:], cls.API_KEY, version)
        assert header.correlation_id == -7
        assert encode_response(-7, cls.API_KEY, version, msg, copy=False) == frame  # what the server sends
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    assert decoded == msg


def _absent_fields(cls, version, path=()):
    """(path, field) for every field, at any depth, that the version lacks but whose parent exists."""
    for f in cls.FIELDS:
        if version not in f.versions:
            yield path, f
            continue
        t = f.type.elem if isinstance(f.type, Array) else f.type
        if is_struct(t):
            yield from _absent_fields(t, version, path + (f,))


def _set_at(msg, path, field, value):
    setattr(_get_at(msg, path), field.name, value)


@pytest.mark.parametrize("cls,version", MESSAGES, ids=IDS)
def test_fields_missing_from_a_version_follow_kafkas_rule(cls, version):
    """Kafka's rule: a non-default value in a field the version lacks is an error unless the
    field is ignorable, in which case it is silently dropped; a default value is always fine."""
    for path, field in _absent_fields(cls, version):
        msg = sample(cls, version)
        other = sample(cls, max(field.versions.lo, cls.MIN_VERSION))
        value = getattr(_get_at(other, path), field.name)
        if value == field.default_value():
            continue
        _set_at(msg, path, field, value)
        if field.ignorable:
            decoded = cls.decode(msg.encode(version), version)
            assert decoded == sample(cls, version), field
        else:
            with pytest.raises(UnsupportedVersionError, match=field.name):
                msg.encode(version)


def _get_at(msg, path):
    obj = msg
    for f in path:
        obj = getattr(obj, f.name)
        if isinstance(obj, list):
            obj = obj[0]
    return obj


@pytest.mark.parametrize("cls", sorted({m[0] for m in MESSAGES}, key=lambda c: c.__name__), ids=lambda c: c.__name__)
def test_versions_outside_the_range_are_unsupported(cls):
    for version in (cls.MIN_VERSION - 1, cls.MAX_VERSION + 1):
        with pytest.raises(UnsupportedVersionError):
            cls().encode(version)
        with pytest.raises(UnsupportedVersionError):
            cls.decode(b"", version)
