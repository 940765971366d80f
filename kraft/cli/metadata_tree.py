"""The file-system view of a ``MetadataImage`` that ``kraft metadata-shell`` browses, laid out as
Kafka's kafka-metadata-shell lays it out::

    /brokers/<id>/{registration,isFenced,inControlledShutdown}   /controllers/<id>/registration
    /topics/<name>/{id,name}  /topics/<name>/<partition>/data     /topicIds/<id> -> the topic
    /configs/<TYPE>/<resource>/<key>   (resource "<default>" for the cluster-wide one)
    /acls/id/<id>   /features/<name>   /clientQuotas/<type>/<name>[/<type>/<name>...]/<key>
    /producerIds/nextProducerId   /local/{snapshotId,nextOffset,records}
    /scram/<SCRAM-SHA-256|SCRAM-SHA-512>/<user>   (salt and keys hidden)

Directories list their children only when opened, so a million partitions cost nothing until
someone looks at them. Files hold one line of text (records as Kafka's JSON data). This module
must not print or read input (see ``metadata_shell.py``).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from kraft.metadata.image import MetadataImage
from kraft.metadata.image_records import acl_records, cluster_records, partition_record
from kraft.metadata.json_form import record_to_json
from kraft.protocol.primitives import uuid_to_base64

CONFIG_TYPES = {2: "TOPIC", 4: "BROKER", 8: "BROKER_LOGGER", 16: "CLIENT_METRICS", 32: "GROUP"}
DEFAULT_NAME = "<default>"


class Dir:
    __slots__ = ("_make", "_entries")

    def __init__(self, make: Callable[[], dict]):
        self._make = make
        self._entries: dict | None = None

    @property
    def entries(self) -> dict:
        if self._entries is None:
            self._entries = self._make()
        return self._entries


class File:
    __slots__ = ("_text",)

    def __init__(self, text):
        self._text = text

    @property
    def text(self) -> str:
        return self._text() if callable(self._text) else str(self._text)


def _data_json(record_and_version) -> str:
    return json.dumps(record_to_json(*record_and_version)["data"])


def _static(entries: dict) -> Dir:
    return Dir(lambda: entries)


def _brokers(image: MetadataImage) -> Dir:
    def make():
        out = {}
        records = {rv.record.broker_id: rv for rv in cluster_records(image) if hasattr(rv.record, "broker_id")}
        for broker_id, b in sorted(image.cluster.brokers.items()):
            rv = records[broker_id]
            out[str(broker_id)] = _static({
                "registration": File(lambda rv=rv: _data_json(rv)),
                "isFenced": File("true" if b.fenced else "false"),
                "inControlledShutdown": File("true" if b.in_controlled_shutdown else "false")})
        return out
    return Dir(make)


def _controllers(image: MetadataImage) -> Dir:
    def make():
        rvs = [rv for rv in cluster_records(image) if hasattr(rv.record, "controller_id")]
        return {str(rv.record.controller_id): _static({"registration": File(lambda rv=rv: _data_json(rv))})
                for rv in rvs}
    return Dir(make)


def _topic_dir(topic) -> Dir:
    def make():
        out = {"id": File(uuid_to_base64(topic.id)), "name": File(topic.name)}
        for pid in sorted(topic.partitions):
            reg = topic.partitions[pid]
            out[str(pid)] = _static({"data": File(lambda pid=pid, reg=reg: _data_json(
                partition_record(topic.id, pid, reg)))})
        return out
    return Dir(make)


def _topics(image: MetadataImage, topic_dirs: dict) -> Dir:
    def make():
        return {name: topic_dirs.setdefault(topic.id, _topic_dir(topic))
                for name, topic in sorted(image.topics.by_name.items())}
    return Dir(make)


def _topic_ids(image: MetadataImage, topic_dirs: dict) -> Dir:
    def make():
        topics = sorted(image.topics.by_id.values(), key=lambda t: uuid_to_base64(t.id))
        return {uuid_to_base64(t.id): topic_dirs.setdefault(t.id, _topic_dir(t)) for t in topics}
    return Dir(make)


def _configs(image: MetadataImage) -> Dir:
    def make():
        by_type: dict[str, dict] = {}
        for (rtype, rname), config in sorted(image.configs.resources.items()):
            kind = CONFIG_TYPES.get(rtype, str(rtype))
            by_type.setdefault(kind, {})[rname or DEFAULT_NAME] = _static(
                {k: File(v) for k, v in sorted(config.items())})
        return {kind: _static(resources) for kind, resources in by_type.items()}
    return Dir(make)


def _acls(image: MetadataImage) -> Dir:
    def make():
        return {"id": _static({uuid_to_base64(rv.record.id): File(lambda rv=rv: _data_json(rv))
                               for rv in acl_records(image)})}
    return Dir(make)


def _client_quotas(image: MetadataImage) -> Dir:
    def make():
        root: dict = {}
        for entity, quotas in image.client_quotas.entities.items():
            node = root
            for etype, ename in entity:
                node = node.setdefault(etype, {}).setdefault(DEFAULT_NAME if ename is None else ename, {})
            for key, value in quotas.items():
                node[key] = File(repr(float(value)))
        return _freeze(root).entries
    return Dir(make)


def _scram(image: MetadataImage) -> Dir:
    def make():
        from kraft.metadata.scram import MECHANISM_NAMES
        by_mechanism: dict = {}
        for (user, mechanism), cred in sorted(image.scram.credentials.items()):
            by_mechanism.setdefault(MECHANISM_NAMES.get(mechanism, str(mechanism)), {})[user] = File(
                f"ScramCredentialData(salt=[hidden], storedKey=[hidden], serverKey=[hidden], "
                f"iterations={cred.iterations})")
        return {name: _static(users) for name, users in sorted(by_mechanism.items())}
    return Dir(make)


def _freeze(tree: dict) -> Dir:
    return _static({k: v if isinstance(v, File) else _freeze(v) for k, v in sorted(tree.items())})


def build_tree(image: MetadataImage, *, snapshot_id=None, next_offset: int = 0, records: int = 0) -> Dir:
    """The root directory of ``image``."""
    topic_dirs: dict = {}  # /topics/<name> and /topicIds/<id> are the same directory
    features = image.features.finalized_versions
    local = {"nextOffset": File(str(next_offset)), "records": File(str(records))}
    if snapshot_id is not None:
        local["snapshotId"] = File(f"{snapshot_id.offset:020d}-{snapshot_id.epoch:010d}")
    return _static({
        "acls": _acls(image),
        "brokers": _brokers(image),
        "clientQuotas": _client_quotas(image),
        "configs": _configs(image),
        "controllers": _controllers(image),
        "features": Dir(lambda: {name: File(str(level)) for name, level in sorted(features.items())}),
        "local": _static(local),
        "producerIds": _static({"nextProducerId": File(str(image.producer_ids.next_producer_id))}),
        "scram": _scram(image),
        "topicIds": _topic_ids(image, topic_dirs),
        "topics": _topics(image, topic_dirs),
    })


def normalize(cwd: str, path: str) -> list[str]:
    """Absolute path components of ``path`` seen from ``cwd`` (``.`` and ``..`` resolved)."""
    parts = [] if path.startswith("/") else [p for p in cwd.split("/") if p]
    for p in path.split("/"):
        if p in ("", "."):
            continue
        if p == "..":
            if parts:
                parts.pop()
        else:
            parts.append(p)
    return parts


def lookup(root: Dir, parts: list[str]):
    """The node at ``parts``, or None."""
    node = root
    for p in parts:
        if not isinstance(node, Dir):
            return None
        node = node.entries.get(p)
        if node is None:
            return None
    return node


def as_path(parts: list[str]) -> str:
    return "/" + "/".join(parts)
