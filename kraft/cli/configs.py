"""``kraft configs``: Kafka's ``kafka-configs.sh`` (ConfigCommand) for topics and brokers:
--describe [--all] and --alter with --add-config / --delete-config (IncrementalAlterConfigs),
with Kafka's output lines ("Dynamic configs for topic t are:", "  k=v sensitive=false
synonyms={...}", "Completed updating config for topic t."). broker-loggers and the
cluster-wide broker default (``--entity-default``) go through kraft's own client
(``configs_direct``). ``--entity-type users`` SCRAM credentials are in ``configs_users``; client quotas
(``--entity-type clients``, and quota keys of ``users``) in ``configs_quotas``."""

from __future__ import annotations

from kraft.cli.kafka_tool_args import ToolError, add_connection_args, admin, cluster_metadata, wait


def parse_add_config(text: str) -> dict[str, str]:
    """Kafka's ``k1=v1,k2=[v2,v3]`` syntax (square brackets keep commas in a value)."""
    out, depth, start = {}, 0, 0
    parts = []
    for i, ch in enumerate(text + ","):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    for part in parts:
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise ToolError(f"--add-config: expected key=value, got {part!r} "
                            "(values with commas go in square brackets: k=[a,b])")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        out[key.strip()] = value
    return out


def _entity(args):
    from confluent_kafka.admin import ConfigResource
    if args.entity_type == "topics":
        if not args.entity_name:
            raise ToolError("--entity-type topics needs --entity-name")
        return ConfigResource("topic", args.entity_name), f"topic {args.entity_name}"
    if args.entity_type == "groups":
        if not args.entity_name:
            raise ToolError("--entity-type groups needs --entity-name")
        return ConfigResource("group", args.entity_name), f"group {args.entity_name}"
    if not args.entity_name:
        raise ToolError("--entity-type brokers needs --entity-name ID or --entity-default")
    return ConfigResource("broker", args.entity_name), f"broker {args.entity_name}"


def _source_name(source) -> str:
    from confluent_kafka.admin import ConfigSource
    value = getattr(source, "value", source)
    if value == 8:
        return "DYNAMIC_GROUP_CONFIG"  # Kafka's name (confluent-kafka calls it GROUP_CONFIG)
    try:
        return ConfigSource(value).name
    except ValueError:
        return str(source)


def entry_line(entry) -> str:
    syn = ", ".join(f"{_source_name(s.source)}:{s.name}={s.value}" for s in entry.synonyms.values())
    value = "null" if entry.is_sensitive or entry.value is None else entry.value
    return f"  {entry.name}={value} sensitive={str(entry.is_sensitive).lower()} synonyms={{{syn}}}"


def _describe(args, adm) -> int:
    from confluent_kafka.admin import ConfigSource
    resource, label = _entity(args)
    if args.entity_type == "topics" and args.entity_name not in cluster_metadata(adm).topics:
        raise ToolError(f"The topic '{args.entity_name}' does not exist.")
    entries = wait(adm.describe_configs([resource])[resource])
    dynamic = {ConfigSource.DYNAMIC_TOPIC_CONFIG.value, ConfigSource.DYNAMIC_BROKER_CONFIG.value,
               ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value, ConfigSource.GROUP_CONFIG.value}
    print(f"{'All' if args.all else 'Dynamic'} configs for {label} are:")
    for name in sorted(entries):
        e = entries[name]
        if args.all or e.source in dynamic:
            print(entry_line(e))
    return 0


def _alter(args, adm) -> int:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry
    resource, label = _entity(args)
    adds = parse_add_config(args.add_config or "")
    deletes = [k.strip() for k in (args.delete_config or "").split(",") if k.strip()]
    if not adds and not deletes:
        raise ToolError("--alter needs --add-config or --delete-config")
    if args.entity_type == "topics" and args.entity_name not in cluster_metadata(adm).topics:
        raise ToolError(f"The topic '{args.entity_name}' does not exist.")
    for k, v in adds.items():
        resource.add_incremental_config(ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET))
    for k in deletes:
        resource.add_incremental_config(ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE))
    wait(adm.incremental_alter_configs([resource])[resource])
    print(f"Completed updating config for {label}.")
    return 0


def _users_or_clients(args) -> int:
    """Kafka's ConfigCommand for users and clients: quota keys go to AlterClientQuotas, SCRAM
    mechanisms (users only) to AlterUserScramCredentials, never both in one command."""
    from kraft.cli import configs_quotas, configs_users
    from kraft.metadata.scram import MECHANISM_TYPES
    if args.describe:
        configs_quotas.describe_quotas(args)
        if args.entity_type == "users" and not args.entity_default:
            configs_users.describe_users(args, admin(args))
        return 0
    adds = parse_add_config(args.add_config or "")
    deletes = [k.strip() for k in (args.delete_config or "").split(",") if k.strip()]
    scram = [k for k in list(adds) + deletes if k.upper() in MECHANISM_TYPES]
    quota = [k for k in list(adds) + deletes if k in configs_quotas.QUOTA_KEYS]
    if args.entity_type == "users" and scram:
        if quota:
            raise ToolError("Cannot alter both quota and SCRAM credential configs simultaneously for 'users' "
                            "using --bootstrap-server.")
        if args.entity_default:
            raise ToolError("The use of --entity-default or --user-defaults is not allowed with User SCRAM "
                            "Credentials using --bootstrap-server.")
        return configs_users.alter_users(args, admin(args), args.add_config or "", args.delete_config or "")
    return configs_quotas.alter_quotas(args, adds, deletes)


def _run(args) -> int:
    if args.describe == args.alter:
        raise ToolError("Command must include exactly one action: --describe, --alter")
    if bool(args.bootstrap_server) == bool(args.bootstrap_controller):
        raise ToolError("You must specify either --bootstrap-controller or --bootstrap-server.")
    if args.bootstrap_controller and args.entity_type != "broker-loggers":
        raise ToolError("--bootstrap-controller: kraft configs reaches a controller for --entity-type broker-loggers "
                        "only; give --bootstrap-server for the others")
    if args.entity_type in ("users", "clients"):
        return _users_or_clients(args)
    if args.entity_type == "broker-loggers" or (args.entity_type == "brokers" and args.entity_default):
        from kraft.cli import configs_direct
        if args.describe:
            return configs_direct.describe(args)
        adds = parse_add_config(args.add_config or "")
        deletes = [k.strip() for k in (args.delete_config or "").split(",") if k.strip()]
        if not adds and not deletes:
            raise ToolError("--alter needs --add-config or --delete-config")
        return configs_direct.alter(args, adds, deletes)
    return (_describe if args.describe else _alter)(args, admin(args))


def register(sub) -> None:
    p = sub.add_parser("configs", help="describe and alter topic, broker, user and client configs (kafka-configs.sh)")
    add_connection_args(p, required=False)
    p.add_argument("--bootstrap-controller", metavar="HOST:PORT",
                   help="with --entity-type broker-loggers: the controller (its controller listener) whose loggers")
    p.add_argument("--entity-type", required=True, choices=("topics", "brokers", "broker-loggers", "groups", "users", "clients"),
                   help="what the configs belong to")
    p.add_argument("--entity-name", help="the topic name, broker id, group id, user name or client id")
    p.add_argument("--entity-default", action="store_true",
                   help="the default entity: the cluster-wide broker default, or the default user or client id (quotas)")
    p.add_argument("--describe", action="store_true", help="list configs")
    p.add_argument("--alter", action="store_true", help="change configs")
    p.add_argument("--all", action="store_true", help="with --describe: every config, not only dynamic ones")
    p.add_argument("--add-config", metavar="K=V,K=[V1,V2]", help="configs to set")
    p.add_argument("--delete-config", metavar="K,K", help="configs to remove (back to their defaults)")
    p.set_defaults(func=_run)
