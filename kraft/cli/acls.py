"""``kraft acls``: Kafka's ``kafka-acls.sh`` (``--add``, ``--remove``, ``--list`` of the ACLs the
StandardAuthorizer enforces), plus ``--explain``: which ACL allowed or denied one operation of
one principal on one resource (or that the super-user or no-ACL rule decided), evaluated with
kraft's own authorizer over the ACLs the cluster lists.

Resource options: ``--topic``, ``--group``, ``--transactional-id`` (repeatable), ``--cluster``;
``--resource-pattern-type`` literal (default for add/remove), prefixed, or for list/remove
filters also any (default for list) and match. ``--producer`` grants WRITE, DESCRIBE and CREATE on
the topics (WRITE and DESCRIBE on ``--transactional-id``, IDEMPOTENT_WRITE on the cluster with
``--idempotent``); ``--consumer`` grants READ and DESCRIBE on the topics and READ on ``--group``.
"""

from __future__ import annotations

import sys

from kraft.cli.kafka_tool_args import ToolError, add_connection_args, admin, wait

OPERATIONS = ("ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS",
              "ALTER_CONFIGS", "IDEMPOTENT_WRITE")
PATTERNS = ("literal", "prefixed", "match", "any")


def _ck():
    from confluent_kafka import admin as ck_admin
    return ck_admin


def _resources(args, ck):
    """(resource type, name) pairs the options name."""
    R = ck.ResourceType
    out = [(R.TOPIC, t) for t in args.topic or []] + [(R.GROUP, g) for g in args.group or []]
    out += [(R.TRANSACTIONAL_ID, t) for t in args.transactional_id or []]
    if args.cluster:
        out.append((R.BROKER, "kafka-cluster"))
    return out


def _operations_for(args, ck, rtype) -> list:
    """The operations to grant or remove on a resource of ``rtype`` (the shortcuts' sets)."""
    R, O = ck.ResourceType, ck.AclOperation
    if args.producer or args.consumer:
        ops = []
        if args.producer:
            ops += {R.TOPIC: [O.WRITE, O.DESCRIBE, O.CREATE], R.TRANSACTIONAL_ID: [O.WRITE, O.DESCRIBE],
                    R.BROKER: [O.IDEMPOTENT_WRITE] if args.idempotent else []}.get(rtype, [])
        if args.consumer:
            ops += {R.TOPIC: [O.READ, O.DESCRIBE], R.GROUP: [O.READ]}.get(rtype, [])
        return ops
    return [getattr(O, op.upper()) for op in (args.operation or ["ALL"])]


def _entries(args):
    """(principal, host, permission) triples of --allow-/--deny- options."""
    allow_hosts = args.allow_host or ["*"]
    deny_hosts = args.deny_host or ["*"]
    out = [(p, h, "ALLOW") for p in args.allow_principal or [] for h in allow_hosts]
    out += [(p, h, "DENY") for p in args.deny_principal or [] for h in deny_hosts]
    return out


def _pattern(ck, name: str):
    return getattr(ck.ResourcePatternType, name.upper())


def _bindings(args, ck) -> list:
    pattern = args.resource_pattern_type or "literal"
    if pattern not in ("literal", "prefixed"):
        raise ToolError(f"A '--resource-pattern-type' value of '{pattern}' is not valid when adding acls.")
    resources = _resources(args, ck)
    if args.producer or args.consumer:
        if args.producer and args.idempotent:
            resources.append((ck.ResourceType.BROKER, "kafka-cluster"))
        if args.consumer and not args.group:
            raise ToolError("--consumer requires --group")
    if not resources:
        raise ToolError("You must specify one of: --topic, --cluster, --group, --transactional-id")
    entries = _entries(args)
    if not entries:
        raise ToolError("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
    out = []
    for rtype, name in resources:
        for op in _operations_for(args, ck, rtype):
            for principal, host, perm in entries:
                out.append(ck.AclBinding(rtype, name, _pattern(ck, pattern), principal, host, op,
                                         getattr(ck.AclPermissionType, perm)))
    return out


def _filters(args, ck, default_pattern: str) -> list:
    pattern = _pattern(ck, args.resource_pattern_type or default_pattern)
    resources = _resources(args, ck) or [(ck.ResourceType.ANY, None)]
    principals = [(p, "ALLOW") for p in args.allow_principal or []] + [(p, "DENY") for p in args.deny_principal or []]
    out = []
    for rtype, name in resources:
        if not principals:
            out.append(ck.AclBindingFilter(rtype, name, pattern, None, None, ck.AclOperation.ANY,
                                           ck.AclPermissionType.ANY))
        for principal, perm in principals:
            for op in ([getattr(ck.AclOperation, o.upper()) for o in args.operation] if args.operation
                       else [ck.AclOperation.ANY]):
                out.append(ck.AclBindingFilter(rtype, name, pattern, principal, None, op,
                                               getattr(ck.AclPermissionType, perm)))
    return out


def _show(binding) -> str:
    return (f"(principal={binding.principal}, host={binding.host}, operation={binding.operation.name}, "
            f"permissionType={binding.permission_type.name})")


def _pattern_text(b) -> str:
    rtype = "CLUSTER" if b.restype.name == "BROKER" else b.restype.name
    return f"ResourcePattern(resourceType={rtype}, name={b.name}, patternType={b.resource_pattern_type.name})"


def _print_grouped(bindings, headline: str) -> None:
    groups: dict = {}
    for b in bindings:
        groups.setdefault(_pattern_text(b), []).append(b)
    for pattern, items in groups.items():
        print(f"{headline} `{pattern}`:")
        for b in items:
            print(f" \t{_show(b)} ")
        print()


def _add(args, adm, ck) -> int:
    bindings = _bindings(args, ck)
    _print_grouped(bindings, "Adding ACLs for resource")
    failed = 0
    for binding, fut in adm.create_acls(bindings).items():
        try:
            wait(fut)
        except Exception as exc:  # noqa: BLE001 - the client's error, printed as Kafka's tool does
            failed += 1
            print(f"Error while adding ACLs: {exc}", file=sys.stderr)
    return 1 if failed else 0


def _remove(args, adm, ck) -> int:
    filters = _filters(args, ck, "literal")
    if not args.force:
        answer = input("Are you sure you want to remove ACLs matching the options? (y/n)\n")
        if not answer.strip().lower().startswith("y"):
            return 0
    failed = 0
    for _, fut in adm.delete_acls(filters).items():
        try:
            removed = wait(fut)
        except Exception as exc:  # noqa: BLE001
            failed += 1
            print(f"Error while removing ACLs: {exc}", file=sys.stderr)
            continue
        _print_grouped(removed, "Removed ACLs for resource")
    return 1 if failed else 0


def _describe(adm, ck, acl_filter) -> list:
    return list(wait(adm.describe_acls(acl_filter)))


def _list(args, adm, ck) -> int:
    bindings = []
    for acl_filter in _filters(args, ck, "any"):
        bindings += _describe(adm, ck, acl_filter)
    _print_grouped(bindings, "Current ACLs for resource")
    return 0


def _explain(args, adm, ck) -> int:
    """Evaluate one operation with kraft's StandardAuthorizer over the cluster's ACLs."""
    import uuid

    from kraft.metadata.acls import AclsImage, StandardAcl
    from kraft.metadata.authorizer import StandardAuthorizer, parse_super_users
    resources = _resources(args, ck)
    if len(resources) != 1 or not args.principal or not args.operation or len(args.operation) != 1:
        raise ToolError("--explain needs --principal, one --operation and one resource (--topic, --group, "
                        "--transactional-id or --cluster)")
    rtype, name = resources[0]
    codes = {"TOPIC": 2, "GROUP": 3, "BROKER": 4, "TRANSACTIONAL_ID": 5}
    stored = _describe(adm, ck, ck.AclBindingFilter(ck.ResourceType.ANY, None, ck.ResourcePatternType.ANY, None,
                                                    None, ck.AclOperation.ANY, ck.AclPermissionType.ANY))
    acls = {uuid.UUID(int=i + 2): StandardAcl(codes.get(b.restype.name, 0), b.name,
                                              3 if b.resource_pattern_type.name == "LITERAL" else 4, b.principal,
                                              b.host, OPERATIONS.index(b.operation.name) + 2,
                                              2 if b.permission_type.name == "DENY" else 3)
            for i, b in enumerate(stored)}
    authorizer = StandardAuthorizer(parse_super_users(args.super_users), args.allow_everyone_if_no_acl_found)
    authorizer.update(AclsImage(acls))
    op = args.operation[0].upper()
    decision = authorizer.explain(args.principal, args.host, OPERATIONS.index(op) + 2, codes[rtype.name], name)
    verdict = "ALLOWED" if decision.allowed else "DENIED"
    what = f"{args.principal} from {args.host}: {op} on {rtype.name if rtype.name != 'BROKER' else 'CLUSTER'} {name}"
    if decision.rule == "acl":
        a = decision.acl
        kind = "LITERAL" if a.pattern_type == 3 else "PREFIXED"
        print(f"{verdict}: {what}, by ACL (resource={a.resource_name} {kind}, principal={a.principal}, "
              f"host={a.host}, operation={OPERATIONS[a.operation - 2]}, "
              f"permissionType={'DENY' if a.permission_type == 2 else 'ALLOW'})")
    elif decision.rule == "super user":
        print(f"{verdict}: {what}, as a super user (super.users)")
    elif decision.rule == "acls on resource":
        print(f"{verdict}: {what}: the resource has ACLs, none for this principal, host and operation")
    else:
        print(f"{verdict}: {what}: no ACL matches the resource, allow.everyone.if.no.acl.found="
              f"{str(args.allow_everyone_if_no_acl_found).lower()}")
    return 0 if decision.allowed else 2


def _run(args) -> int:
    actions = [a for a in ("add", "remove", "list", "explain") if getattr(args, a)]
    if len(actions) != 1:
        raise ToolError("Command must include exactly one action: --list, --add, --remove, --explain.")
    if args.resource_pattern_type and args.resource_pattern_type not in PATTERNS:
        raise ToolError(f"--resource-pattern-type: one of {', '.join(PATTERNS)}")
    ck = _ck()
    adm = admin(args)
    return {"add": _add, "remove": _remove, "list": _list, "explain": _explain}[actions[0]](args, adm, ck)


def register(sub) -> None:
    p = sub.add_parser("acls", help="add, remove, list and explain ACLs (kafka-acls.sh)")
    add_connection_args(p)
    for action, text in (("add", "add ACLs"), ("remove", "remove ACLs"), ("list", "list ACLs"),
                         ("explain", "say which ACL or rule decides one operation (kraft's own)")):
        p.add_argument(f"--{action}", action="store_true", help=text)
    p.add_argument("--topic", action="append", metavar="NAME", help="a topic (repeatable)")
    p.add_argument("--group", action="append", metavar="NAME", help="a consumer group (repeatable)")
    p.add_argument("--transactional-id", action="append", metavar="ID", help="a transactional id (repeatable)")
    p.add_argument("--cluster", action="store_true", help="the cluster resource")
    p.add_argument("--resource-pattern-type", choices=PATTERNS, default=None,
                   help="literal (default for add/remove), prefixed; match or any (default for list) as filters")
    p.add_argument("--allow-principal", action="append", metavar="TYPE:NAME", help="principal allowed")
    p.add_argument("--deny-principal", action="append", metavar="TYPE:NAME", help="principal denied")
    p.add_argument("--allow-host", action="append", metavar="HOST", help="host allowed (default *)")
    p.add_argument("--deny-host", action="append", metavar="HOST", help="host denied (default *)")
    p.add_argument("--operation", action="append", type=str.upper, choices=OPERATIONS, metavar="OP",
                   help=f"operation (repeatable; default ALL): {', '.join(OPERATIONS)}")
    p.add_argument("--producer", action="store_true", help="WRITE, DESCRIBE, CREATE on the topics")
    p.add_argument("--consumer", action="store_true", help="READ, DESCRIBE on the topics, READ on the group")
    p.add_argument("--idempotent", action="store_true", help="with --producer: IDEMPOTENT_WRITE on the cluster")
    p.add_argument("--force", action="store_true", help="do not ask before removing")
    p.add_argument("--principal", metavar="TYPE:NAME", help="--explain: the principal")
    p.add_argument("--host", default="127.0.0.1", help="--explain: the client's address")
    p.add_argument("--super-users", default="", metavar="P1;P2", help="--explain: the cluster's super.users")
    p.add_argument("--allow-everyone-if-no-acl-found", action="store_true",
                   help="--explain: the cluster's allow.everyone.if.no.acl.found")
    p.set_defaults(func=_run)
