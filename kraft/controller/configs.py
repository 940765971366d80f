"""IncrementalAlterConfigs (44), AlterConfigs (33) and DescribeConfigs (32) on the controller:
Kafka's ``ConfigurationControlManager`` as pure handlers over the uncommitted image.

Per resource, Kafka's order: request-shape checks (duplicate resources or keys, null values,
unknown operations: INVALID_REQUEST), then the new value of each key (APPEND/SUBTRACT only on
LIST configs, starting from the default when unset), then validation of the resulting configs
(topic name, every key known and valid: INVALID_CONFIG; broker keys as Kafka's broker checks
them, INVALID_REQUEST, then what kraft cannot honour, INVALID_CONFIG: ``broker_config_defs``;
group keys, GROUP resources, as Kafka's GroupConfig: ``group_config_defs``),
then existence (unknown topic:
UNKNOWN_TOPIC_OR_PARTITION; unregistered broker: BROKER_ID_NOT_REGISTERED). Resources that pass
contribute ``ConfigRecord``s, proposed together as one atomic batch; ``validate_only`` proposes
none. A key whose value does not change writes no record, except on broker resources, where
Kafka always writes one so brokers re-apply it. DescribeConfigs is a read
(``kraft.metadata.config_describe``). Nothing here mutates the image or does I/O.
"""

from __future__ import annotations

from collections import Counter

from kraft.controller.api_error import ApiError
from kraft.controller.result import ControllerContext, ControllerResult
from kraft.errors import ErrorCode, KraftError
from kraft.metadata.broker_config_defs import BROKER_CONFIGS, validate_broker_configs
from kraft.metadata.config_defs import TOPIC_CONFIGS, validate_topic_configs
from kraft.metadata.config_describe import describe_configs
from kraft.metadata.configs import BROKER, GROUP, TOPIC
from kraft.metadata.group_config_defs import GROUP_CONFIGS, validate_group_configs
from kraft.metadata.records import ConfigRecord
from kraft.metadata.topic_names import topic_name_error
from kraft.protocol.messages.configs import (OP_APPEND, OP_DELETE, OP_SET, OP_SUBTRACT, AlterConfigsResponse,
                                             IncrementalAlterConfigsResponse)

_OPS = {OP_SET: "SET", OP_DELETE: "DELETE", OP_APPEND: "APPEND", OP_SUBTRACT: "SUBTRACT"}


def _definition(kind: int, key: str):
    return {TOPIC: TOPIC_CONFIGS, GROUP: GROUP_CONFIGS}.get(kind, BROKER_CONFIGS).get(key)


def _check_resource_name(kind: int, name: str) -> None:
    if kind == TOPIC:
        if name == "":
            raise ApiError(ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed.")
        error = topic_name_error(name)
        if error is not None:
            raise ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION, error)
    elif kind == BROKER:
        if name != "" and not name.lstrip("-").isdigit():
            raise ApiError(ErrorCode.INVALID_REQUEST, f"Invalid broker name {name}")
    elif kind == GROUP:
        if name == "":
            raise ApiError(ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.")
    else:
        raise ApiError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {kind} for config changes")


def _check_exists(ctx: ControllerContext, kind: int, name: str) -> None:
    image = ctx.image
    if kind == TOPIC and image.topics.get_topic_by_name(name) is None:
        raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
    if kind == BROKER and name != "":
        broker_id = int(name)
        if (broker_id not in image.cluster.brokers and broker_id not in image.cluster.controllers
                and broker_id != ctx.node_id):
            raise ApiError(ErrorCode.BROKER_ID_NOT_REGISTERED, f"No broker with id {broker_id} found.")


def _validate(ctx: ControllerContext, kind: int, name: str, current: dict, changes: dict) -> None:
    """Kafka's ``validateAlterConfig``: the resource's configs after ``changes`` (key -> new value
    or None) must be valid, then the resource must exist."""
    _check_resource_name(kind, name)
    if kind in (TOPIC, GROUP):
        merged = dict(current)
        for key, value in changes.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
        if kind == TOPIC:
            validate_topic_configs(merged)
        else:  # a group need not exist (Kafka keeps configs of groups to come)
            validate_group_configs(merged, ctx.settings)
    else:
        validate_broker_configs(changes, per_broker=name != "")
    _check_exists(ctx, kind, name)


def _list_parts(value: str | None, kind: int, key: str) -> list:
    if value is None:
        definition = _definition(kind, key)
        value = None if definition is None else definition.default
    return [] if value is None else [part for part in value.split(",") if part]


def _incremental_changes(kind: int, current: dict, configs) -> dict:
    """key -> new value (None: deleted) for one resource of an IncrementalAlterConfigs request."""
    keys = Counter(c.name for c in configs)
    if any(n > 1 for n in keys.values()):
        raise ApiError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    changes = {}
    for config in configs:
        op, key, value = config.config_operation, config.name, config.value
        if op not in _OPS:
            raise ApiError(ErrorCode.INVALID_REQUEST, f"Unknown alter config operation type {op}")
        if op != OP_DELETE and value is None:
            raise ApiError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {key}")
        if op == OP_SET:
            changes[key] = value
        elif op == OP_DELETE:
            changes[key] = None
        else:
            definition = _definition(kind, key)
            if definition is None or not definition.splittable:
                raise ApiError(ErrorCode.INVALID_CONFIG,
                               f"Can't {_OPS[op]} to key {key} because its type is not LIST.")
            parts = _list_parts(current.get(key), kind, key)
            for item in value.split(","):
                if op == OP_APPEND and item not in parts:
                    parts.append(item)
                elif op == OP_SUBTRACT and item in parts:
                    parts.remove(item)
            changes[key] = ",".join(parts)
    return changes


def _records(kind: int, name: str, current: dict, changes: dict, implicit_deletes: bool = False) -> list:
    records = [ConfigRecord(resource_type=kind, resource_name=name, name=key, value=value)
               for key, value in changes.items() if current.get(key) != value or kind == BROKER]
    if implicit_deletes:  # legacy AlterConfigs replaces the whole set
        records += [ConfigRecord(resource_type=kind, resource_name=name, name=key, value=None)
                    for key in current if key not in changes]
    return records


def _alter(ctx: ControllerContext, request, response_cls, legacy: bool) -> ControllerResult:
    response = response_cls()
    records: list = []
    counts = Counter((r.resource_type, r.resource_name) for r in request.resources)
    for resource in request.resources:
        kind, name = resource.resource_type, resource.resource_name
        entry = response_cls.Resource(resource_type=kind, resource_name=name)
        response.responses.append(entry)
        current = ctx.image.configs.config(kind, name)
        try:
            if counts[(kind, name)] > 1:
                raise ApiError(ErrorCode.INVALID_REQUEST, "Duplicate resource.")
            if legacy:
                nulls = [c.name for c in resource.configs if c.value is None]
                if nulls:
                    raise ApiError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {','.join(nulls)}")
                changes = {c.name: c.value for c in resource.configs}
                deletes = {key: None for key in current if key not in changes}
                _validate(ctx, kind, name, current, {**changes, **deletes})
            else:
                changes = _incremental_changes(kind, current, resource.configs)
                _validate(ctx, kind, name, current, changes)
        except KraftError as e:
            error = ApiError.of(e)
            entry.error_code, entry.error_message = int(error.code), error.message
            continue
        records += _records(kind, name, current, changes, implicit_deletes=legacy)
    if request.validate_only:
        records = []
    return ControllerResult(records=records, response=response, atomic=bool(records))


def handle_incremental_alter_configs(ctx: ControllerContext, request) -> ControllerResult:
    return _alter(ctx, request, IncrementalAlterConfigsResponse, legacy=False)


def handle_alter_configs(ctx: ControllerContext, request) -> ControllerResult:
    """Legacy AlterConfigs: the request's configs replace the resource's whole set."""
    return _alter(ctx, request, AlterConfigsResponse, legacy=True)


def handle_describe_configs(ctx: ControllerContext, request) -> ControllerResult:
    """A read: the controller's own view (its node id and static settings), no records."""
    return ControllerResult(response=describe_configs(ctx.image, request, node_id=ctx.node_id,
                                                      static_configs=ctx.settings))


HANDLERS = {44: handle_incremental_alter_configs, 33: handle_alter_configs, 32: handle_describe_configs}
