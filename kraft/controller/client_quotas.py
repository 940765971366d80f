"""AlterClientQuotas (49) and DescribeClientQuotas (48): Kafka's
``ClientQuotaControlManager.alterClientQuotas`` and ``ClientQuotasImage.describe`` as pure
functions of the image.

Alter validates each entry as Kafka does, with its INVALID_REQUEST messages: entity types
``user``, ``client-id``, ``ip`` (each at most once, a name never empty, null = the default
entity); ``ip`` alone, never with user or client-id; keys per entity kind (``QuotaConfig``:
producer_byte_rate / consumer_byte_rate LONG, request_percentage / controller_mutation_rate
DOUBLE for user and client-id; connection_creation_rate INT for ip); a value > 0, integral
for LONG/INT keys and within their range; a key twice in one entry or an entity twice in one
request fails that entity. Only changes become ``ClientQuotaRecord``s (setting the current
value or removing a missing key writes nothing); the records are one atomic unit;
``validate_only`` answers without records. Describe is also what brokers answer from their
own image (``kraft.server.broker_admin``). Nothing here mutates the image or does I/O.
"""

from __future__ import annotations

import ipaddress

from kraft.controller.result import ControllerContext, ControllerResult
from kraft.errors import ErrorCode
from kraft.metadata.client_quotas import quota_entity
from kraft.metadata.records import ClientQuotaRecord
from kraft.protocol.messages.client_quotas import (MATCH_DEFAULT, MATCH_EXACT, MATCH_SPECIFIED,
                                                   AlterClientQuotasResponse, DescribeClientQuotasResponse,
                                                   EntityData)

USER, CLIENT_ID, IP = "user", "client-id", "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)
_LONG_MAX, _INT_MAX = float(2 ** 63 - 1), float(2 ** 31 - 1)
#: QuotaConfig.userAndClientQuotaConfigs(): key -> (type, integral upper bound or None)
USER_CLIENT_KEYS = {"producer_byte_rate": ("LONG", _LONG_MAX), "consumer_byte_rate": ("LONG", _LONG_MAX),
                    "request_percentage": ("DOUBLE", None), "controller_mutation_rate": ("DOUBLE", None)}
#: QuotaConfig.ipConfigs()
IP_KEYS = {"connection_creation_rate": ("INT", _INT_MAX)}
INVALID = ErrorCode.INVALID_REQUEST


class QuotaRequestError(Exception):
    def __init__(self, code: ErrorCode, message: str):
        super().__init__(message)
        self.code, self.message = code, message


def entity_text(entity: dict) -> str:
    """Kafka's ``ClientQuotaEntity.toString`` (its map printed as Java does)."""
    inner = ", ".join(f"{t}={'null' if n is None else n}" for t, n in entity.items())
    return f"ClientQuotaEntity(entries={{{inner}}})"


def _valid_ip(name) -> bool:
    # Kafka resolves names with InetAddress.getByName; a controller does no I/O, so only
    # literal addresses (and the default entity) are accepted here.
    if name is None:
        return True
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return False


def _validate_entity(entity_data) -> tuple[dict | None, tuple | None]:
    """(type -> name, None) or (None, (code, message)): Kafka's validateEntity and
    configKeysForEntityType."""
    if not entity_data:
        return None, (INVALID, "Invalid empty client quota entity")
    entity: dict = {}
    for e in entity_data:
        if e.entity_type in entity:
            return None, (INVALID, f"Invalid client quota entity, duplicate entity entry {e.entity_type}")
        if e.entity_type not in ENTITY_TYPES:
            return None, (INVALID, f"Unhandled client quota entity type: {e.entity_type}")
        entity[e.entity_type] = e.entity_name
        if e.entity_name is not None and e.entity_name == "":
            return None, (INVALID, f"Empty {e.entity_type} not supported")
    return entity, None


def _keys_for(entity: dict):
    if IP in entity:
        if USER in entity or CLIENT_ID in entity:
            # Kafka's message, its missing space included
            return None, (INVALID, "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId")
        if not _valid_ip(entity[IP]):
            return None, (INVALID, f"{entity[IP]} is not a valid IP or resolvable host.")
        return IP_KEYS, None
    return USER_CLIENT_KEYS, None


def check_value(keys: dict, key: str, value: float):
    """Kafka's validateQuotaKeyValue: None or (code, message)."""
    spec = keys.get(key)
    if spec is None:
        return INVALID, f"Invalid configuration key {key}"
    if value <= 0.0:
        return INVALID, f"Quota {key} must be greater than 0"
    kind, bound = spec
    if kind == "DOUBLE":
        return None
    if value > bound:
        return INVALID, f"Proposed value for {key} is too large for {'an INT' if kind == 'INT' else 'a LONG'}."
    if abs(value % 1.0) > 1e-6:
        return INVALID, f"{key} cannot be a fractional value."
    return None


def _alter_entity(image, entity: dict, ops: dict):
    """(records, error or None) for one entity's operations (key -> value, None = remove)."""
    keys, error = _keys_for(entity)
    if error is not None:
        return [], error
    current = image.client_quotas.entities.get(tuple(sorted(entity.items())), {})
    E = ClientQuotaRecord.EntityData
    records = []
    for key, value in ops.items():
        if value is None:
            if key in current:
                records.append(ClientQuotaRecord(entity=[E(entity_type=t, entity_name=n) for t, n in entity.items()],
                                                 key=key, value=0.0, remove=True))
            continue
        error = check_value(keys, key, value)
        if error is not None:
            return [], error
        if current.get(key) != value:
            records.append(ClientQuotaRecord(entity=[E(entity_type=t, entity_name=n) for t, n in entity.items()],
                                             key=key, value=float(value), remove=False))
    return records, None


def handle_alter_client_quotas(ctx: ControllerContext, request) -> ControllerResult:
    results: list = []  # [entity_data, code, message] in request order
    seen: dict = {}  # entity image key -> its result
    records: list = []
    for entry in request.entries:
        key = quota_entity(entry.entity)
        ops: dict = {}
        duplicate_key = False
        for op in entry.ops:
            duplicate_key |= op.key in ops
            ops.setdefault(op.key, None if op.remove else op.value)
        if key in seen or duplicate_key:
            # Kafka keys its results by entity and checks "already answered" after the key
            # check, so a duplicate key too ends as "Ignoring duplicate entity"; an earlier
            # entry's records for the same entity stay.
            result = seen.get(key) or [entry.entity, 0, None]
            result[1:] = [INVALID, f"Ignoring duplicate entity {entity_text(dict(key))}"]
            if key not in seen:
                seen[key] = result
                results.append(result)
            continue
        entity, error = _validate_entity(entry.entity)
        if error is None:
            new, error = _alter_entity(ctx.image, entity, ops)
            records += new
        code, message = error if error is not None else (ErrorCode.NONE, None)
        seen[key] = result = [entry.entity, code, message]
        results.append(result)
    Entry = AlterClientQuotasResponse.Entry
    response = AlterClientQuotasResponse(entries=[
        Entry(error_code=int(code), error_message=message,
              entity=[EntityData(entity_type=e.entity_type, entity_name=e.entity_name) for e in data])
        for data, code, message in results])
    if request.validate_only:
        records = []
    return ControllerResult(records=records, response=response, atomic=bool(records))


def _filters(components) -> tuple[dict, set]:
    exact: dict = {}
    any_name: set = set()
    for c in components:
        t = c.entity_type
        if not t:
            raise QuotaRequestError(INVALID, "Invalid empty entity type.")
        if t in exact or t in any_name:
            raise QuotaRequestError(INVALID, f"Entity type {t} cannot appear more than once in the filter.")
        if t not in ENTITY_TYPES:
            raise QuotaRequestError(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {t}")
        if c.match_type == MATCH_EXACT:
            if c.match is None:
                raise QuotaRequestError(INVALID, "Request specified MATCH_TYPE_EXACT, but set match string to null.")
            exact[t] = c.match
        elif c.match_type == MATCH_DEFAULT:
            if c.match is not None:
                raise QuotaRequestError(INVALID, "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
            exact[t] = None
        elif c.match_type == MATCH_SPECIFIED:
            if c.match is not None:
                raise QuotaRequestError(INVALID, "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
            any_name.add(t)
        else:
            raise QuotaRequestError(INVALID, f"Unknown match type {c.match_type}")
    if IP in exact or IP in any_name:
        if exact.keys() & {USER, CLIENT_ID} or any_name & {USER, CLIENT_ID}:
            raise QuotaRequestError(INVALID, "Invalid entity filter component combination. IP filter component "
                                             "should not be used with user or clientId filter component.")
    return exact, any_name


def matches(entity: dict, exact: dict, any_name: set, strict: bool) -> bool:
    """Kafka's ClientQuotasImage.matches: every exact component present with that name (None:
    the default entity), every "any" type present (the default entity included, as Kafka's
    containsKey); ``strict`` also excludes entities with types the filter does not name."""
    if strict and len(entity) != len(exact) + len(any_name):
        return False
    for t, name in exact.items():
        if t not in entity or entity[t] != name:
            return False
    return all(t in entity for t in any_name)


def describe_client_quotas(image, request) -> DescribeClientQuotasResponse:
    R = DescribeClientQuotasResponse
    try:
        exact, any_name = _filters(request.components)
    except QuotaRequestError as exc:
        return R(error_code=int(exc.code), error_message=exc.message, entries=None)
    entries = []
    for key, quotas in image.client_quotas.entities.items():
        entity = dict(key)
        if matches(entity, exact, any_name, request.strict):
            entries.append(R.Entry(entity=[EntityData(entity_type=t, entity_name=n) for t, n in key],
                                   values=[R.Entry.Value(key=k, value=v) for k, v in sorted(quotas.items())]))
    return R(error_code=0, error_message=None, entries=entries)


def alter_error(req, version, code, message=None):
    Entry = AlterClientQuotasResponse.Entry
    return AlterClientQuotasResponse(entries=[
        Entry(error_code=int(code), error_message=message,
              entity=[EntityData(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity])
        for entry in req.entries])


def describe_error(req, version, code, message=None):
    return DescribeClientQuotasResponse(error_code=int(code), error_message=message, entries=None)


HANDLERS = {49: handle_alter_client_quotas}
ERROR_RESPONSES = {49: alter_error, 48: describe_error}
