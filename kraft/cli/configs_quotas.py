"""``kraft configs --entity-type clients|users`` for client quotas, as Kafka's ConfigCommand
does them with --bootstrap-server (AlterClientQuotas / DescribeClientQuotas, sent with kraft's
own client: confluent-kafka has no client quota API):

* ``--alter --entity-type clients --entity-name flood --add-config producer_byte_rate=1048576``
  (``--entity-default`` for the default entity; ``--delete-config k,k``): "Completed updating
  config for client flood." / "Completed updating default config for clients in the cluster."
* ``--describe``: "Quota configs for client-id 'flood' are producer_byte_rate=1048576.0", one
  line per entity matching strictly (Kafka's ``ClientQuotaFilter.containsOnly``); without a
  name, every entity of that type.

``--entity-type users`` carries quota keys and SCRAM credentials: ``configs`` sends SCRAM keys
to ``configs_users`` and quota keys here, and refuses both at once as Kafka does. The
connection is plaintext to the first bootstrap address that answers (``--command-config``
is not applied to these requests).
"""

from __future__ import annotations

import asyncio

from kraft.cli.kafka_tool_args import ToolError
from kraft.errors import ErrorCode

QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate")
ENTITY = {"clients": "client-id", "users": "user"}
SHOWN = {"user": "user-principal", "client-id": "client-id", "ip": "ip"}


def java_double(v: float) -> str:
    """``Double.toString``: plain between 1e-3 and 1e7, else Java's scientific form."""
    if v == 0 or 1e-3 <= abs(v) < 1e7:
        return repr(float(v))
    mantissa, exp = f"{v:.16e}".split("e")
    mantissa = mantissa.rstrip("0")
    if mantissa.endswith("."):
        mantissa += "0"
    return f"{float(mantissa)!r}E{int(exp)}"


def _call(args, request, version: int = 1):
    """``request`` answered by a broker of ``--bootstrap-server`` over kraft's own client, with
    ``--command-config``'s security settings."""
    from kraft.cli.configs_direct import bootstrap_addresses, call
    from kraft.cli.kafka_tool_args import client_config
    conf = client_config(args)
    return asyncio.run(call(conf, bootstrap_addresses(conf), request, version))


def _name(args):
    if args.entity_default:
        return None
    if not args.entity_name:
        raise ToolError(f"--entity-type {args.entity_type} needs --entity-name or --entity-default")
    return args.entity_name


def alter_quotas(args, adds: dict, deletes: list) -> int:
    from kraft.protocol.messages.client_quotas import AlterClientQuotasRequest, EntityData
    A = AlterClientQuotasRequest
    what = "quota and SCRAM credential configs" if args.entity_type == "users" else "quota configs"
    for keys, verb in ((list(adds), "added"), (deletes, "deleted")):
        bad = [k for k in keys if k not in QUOTA_KEYS]
        if bad:
            raise ToolError(f"Only {what} can be {verb} for '{args.entity_type}' using --bootstrap-server. "
                            f"Unexpected config names: {bad}")
    name = _name(args)
    ops = []
    for k, v in adds.items():
        try:
            ops.append(A.Entry.Op(key=k, value=float(v), remove=False))
        except ValueError:
            raise ToolError(f"--add-config: {k} takes a number, not {v!r}") from None
    ops += [A.Entry.Op(key=k, value=0.0, remove=True) for k in deletes]
    if not ops:
        raise ToolError("--alter needs --add-config or --delete-config")
    req = A(entries=[A.Entry(entity=[EntityData(entity_type=ENTITY[args.entity_type], entity_name=name)], ops=ops)],
            validate_only=False)
    resp = _call(args, req)
    for e in resp.entries:
        if e.error_code:
            raise ToolError(f"{ErrorCode(e.error_code).name}: {e.error_message or ''}".rstrip(": "))
    print(f"Completed updating config for {args.entity_type[:-1]} {name}." if name is not None
          else f"Completed updating default config for {args.entity_type} in the cluster.")
    return 0


def describe_lines(resp) -> list[str]:
    lines = []
    for entry in resp.entries or ():
        names = {e.entity_type: e.entity_name for e in entry.entity}
        parts = [f"{SHOWN[t]} '{names[t]}'" if names[t] is not None else f"the default {SHOWN[t]}"
                 for t in ("user", "client-id", "ip") if t in names]
        values = ", ".join(f"{v.key}={java_double(v.value)}" for v in entry.values)
        lines.append(f"Quota configs for {', '.join(parts)} are {values}")
    return sorted(lines)


def describe_quotas(args) -> int:
    from kraft.protocol.messages.client_quotas import (MATCH_DEFAULT, MATCH_EXACT, MATCH_SPECIFIED,
                                                       DescribeClientQuotasRequest)
    C = DescribeClientQuotasRequest.Component
    t = ENTITY[args.entity_type]
    if args.entity_default:
        component = C(entity_type=t, match_type=MATCH_DEFAULT, match=None)
    elif args.entity_name:
        component = C(entity_type=t, match_type=MATCH_EXACT, match=args.entity_name)
    else:
        component = C(entity_type=t, match_type=MATCH_SPECIFIED, match=None)
    resp = _call(args, DescribeClientQuotasRequest(components=[component], strict=True))
    if resp.error_code:
        raise ToolError(f"{ErrorCode(resp.error_code).name}: {resp.error_message or ''}")
    for line in describe_lines(resp):
        print(line)
    return 0
