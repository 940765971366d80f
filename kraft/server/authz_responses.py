"""Answers to requests (or parts of requests) the authorizer refused, built from the request.

Kafka answers an unauthorized resource in the place the client looks for it: a topic's
partitions each carry TOPIC_AUTHORIZATION_FAILED, a group's entry GROUP_AUTHORIZATION_FAILED,
and so on. ``refused(request, version, code)`` mirrors the request into its response type: every
error field gets ``code``, every array of entries is answered entry by entry, and the fields that
name an entry (topic name or id, partition index, group, transactional id, resource) are copied.
``merge`` appends refused entries to the answer the node gave for the authorized rest. The
pairing of request and response arrays is by name, a short table of Kafka's renames, or the only
candidate. Pure: schemas and values only.
"""

from __future__ import annotations

import copy

from kraft.protocol import Response, response_class
from kraft.protocol.schema import Array, is_struct

#: response array name -> request array names it answers
_ARRAY_PAIRS = {
    "responses": ("topic_data", "topics", "resources", "topic_names"),
    "partition_responses": ("partition_data",),
    "results": ("resources", "topics", "groups_names", "creations"),
    "filter_results": ("filters",),
    "partition_result": ("partitions",),
    "replica_election_results": ("topic_partitions",),
    "results_by_topic_v3_and_below": ("v3_and_below_topics",),
    "results_by_transaction": ("transactions",),
    "topic_results": ("topics",),
    "results_by_partition": ("partitions",),
    "partitions": ("partitions", "partition_data", "partition_indexes"),
    "groups": ("groups", "group_ids", "groups_names"),
    "transaction_states": ("transactional_ids",),
    "coordinators": ("coordinator_keys",),
    "members": ("members",),
}
#: response field -> request fields that hold its value
_KEY_SOURCES = {
    "name": ("name", "topic"), "topic": ("topic", "name"),
    "partition_index": ("partition_index", "partition", "index"), "partition": ("partition", "partition_index"),
    "partition_id": ("partition_id", "partition"),
}
_ERROR_FIELDS = ("error_code", "partition_error_code")
#: fields Kafka answers -1 in a refused entry
_UNKNOWN_FIELDS = frozenset({"base_offset", "offset", "committed_offset", "high_watermark", "last_stable_offset",
                             "low_watermark", "end_offset", "node_id", "producer_id", "leader_epoch",
                             "committed_leader_epoch", "generation_id", "producer_epoch"})
_SCALAR_KEYS = ("group_id", "transactional_id", "key", "partition_index", "partition_id", "partition")


def _fields(cls, version: int):
    return [f for f in cls.FIELDS if version in f.versions]


def _struct_array(field) -> bool:
    return isinstance(field.type, Array)


def _source(req_fields: dict, name: str):
    if name in req_fields:
        return name
    for candidate in _ARRAY_PAIRS.get(name, ()):
        if candidate in req_fields:
            return candidate
    return None


def _mirror(cls, source, version: int, code: int, message):
    """An instance of struct ``cls`` answering ``source`` (a request struct or a plain key)."""
    out = cls()
    req_fields = ({f.name: f for f in _fields(type(source), version)}
                  if hasattr(type(source), "FIELDS") else {})
    for f in _fields(cls, version):
        if f.name in _ERROR_FIELDS:
            setattr(out, f.name, int(code))
        elif f.name in _UNKNOWN_FIELDS and not _struct_array(f):
            setattr(out, f.name, -1)
        elif f.name == "records":
            setattr(out, f.name, b"")  # Kafka's MemoryRecords.EMPTY: librdkafka refuses a null one
        elif f.name in ("error_message", "partition_error_message") and message is not None:
            setattr(out, f.name, message)
        elif _struct_array(f):
            src = _source(req_fields, f.name)
            items = getattr(source, src, None) if src is not None else None
            if items and is_struct(f.type.elem):
                setattr(out, f.name, [_mirror(f.type.elem, item, version, code, message) for item in items])
            elif items and not is_struct(f.type.elem):
                setattr(out, f.name, list(items))
        elif not req_fields:  # ``source`` is a plain key (a group id, a partition index...)
            if f.name in ("name", "group_id", "transactional_id", "key", "topic") and isinstance(source, str):
                setattr(out, f.name, source)
            elif f.name in _SCALAR_KEYS[3:] and isinstance(source, int):
                setattr(out, f.name, source)
        else:
            for candidate in _KEY_SOURCES.get(f.name, (f.name,)):
                if candidate in req_fields and not is_struct(req_fields[candidate].type) \
                        and not isinstance(req_fields[candidate].type, Array):
                    setattr(out, f.name, getattr(source, candidate))
                    break
    return out


def refused(request, version: int, code: int, message: str | None = None) -> Response:
    """The whole request answered with ``code`` wherever the response has an error field."""
    cls = response_class(request.API_KEY)
    if request.API_KEY == 51:  # AlterUserScramCredentials: one result per user, deletions and upsertions alike
        users = dict.fromkeys(e.name for e in [*request.deletions, *request.upsertions])
        return cls(results=[cls.Result(user=u, error_code=code, error_message=message) for u in users])
    if request.API_KEY == 34:  # AlterReplicaLogDirs: each partition of each directory, by topic
        by_topic: dict = {}
        for d in request.dirs:
            for t in d.topics:
                by_topic.setdefault(t.name, []).extend(t.partitions)
        R = cls.Result
        return cls(results=[R(topic_name=n, partitions=[R.Partition(partition_index=p, error_code=code)
                                                        for p in dict.fromkeys(ps)]) for n, ps in by_topic.items()])
    return _mirror(cls, request, version, code, message)


def with_entries(request, field: str, entries):
    """A shallow copy of ``request`` whose array ``field`` holds ``entries``."""
    clone = copy.copy(request)
    setattr(clone, field, list(entries))
    return clone


def response_array(request, version: int, field: str) -> str | None:
    """The response array that answers the request array ``field``."""
    cls = response_class(request.API_KEY)
    for f in _fields(cls, version):
        if _struct_array(f) and (f.name == field or field in _ARRAY_PAIRS.get(f.name, ())):
            return f.name
    return None


def merge(response, request, version: int, field: str, refused_part) -> Response:
    """Append the entries of ``refused_part`` (a response) to ``response``'s array answering
    ``field``; an encoded answer is decoded first (only mixed requests take this path)."""
    cls = response_class(request.API_KEY)
    if not isinstance(response, Response):
        response = cls.decode(b"".join(bytes(p) for p in response) if isinstance(response, list)
                              else bytes(response), version)
    name = response_array(request, version, field)
    if name is not None:
        getattr(response, name).extend(getattr(refused_part, name))
    return response
