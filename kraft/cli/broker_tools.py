"""Three of Kafka's small broker tools: ``kraft broker-api-versions`` (BrokerApiVersionsCommand:
each broker's ApiVersions, "Produce(0): 0 to 11 [usable: 11]"), ``kraft log-dirs --describe``
(LogDirsCommand: DescribeLogDirs of each broker as Kafka's JSON) and ``kraft cluster
cluster-id|unregister`` (ClusterTool). Brokers are found with Metadata through
--bootstrap-server; each is then asked directly with our ``NodeClient``."""

from __future__ import annotations

import asyncio
import json

from kraft.cli.kafka_tool_args import ToolError, add_connection_args, admin, cluster_metadata, wait
from kraft.errors import ErrorCode, KraftError
from kraft.protocol.api_keys import ApiKey
from kraft.protocol.message import REQUESTS

API_VERSIONS_VERSION = 3
DESCRIBE_LOG_DIRS_VERSION = 4
UNREGISTER_BROKER_VERSION = 0


def api_name(key: int) -> str:
    """Kafka's ApiKeys display name: LIST_OFFSETS -> ListOffsets."""
    try:
        return "".join(w.capitalize() for w in ApiKey(key).name.split("_"))
    except ValueError:
        return f"Unknown{key}"


def api_version_lines(node: str, api_keys) -> list[str]:
    """Kafka's layout: ``host:port (id: N rack: R isFenced: false) -> (``, a tab-indented line
    per API with the range this tool could use, ``)``."""
    lines = [f"{node} -> ("]
    for i, a in enumerate(sorted(api_keys, key=lambda a: a.api_key)):
        ours = REQUESTS.get(a.api_key)
        usable = "NONE"
        if ours is not None and ours.MIN_VERSION <= a.max_version and a.min_version <= ours.MAX_VERSION:
            usable = str(min(a.max_version, ours.MAX_VERSION))
        comma = "," if i < len(api_keys) - 1 else ""
        lines.append(f"\t{api_name(a.api_key)}({a.api_key}): {a.min_version} to {a.max_version} [usable: {usable}]{comma}")
    lines.append(")")
    return lines


async def _ask(host: str, port: int, request, version: int, timeout_s: float):
    from kraft.client.node_client import NodeClient
    client = NodeClient(host, port, client_id="kraft-tools", request_timeout_ms=int(timeout_s * 1000))
    try:
        return await client.request(request, version)
    except KraftError as exc:
        raise ToolError(f"{host}:{port}: {exc}") from None
    finally:
        await client.close()


def _brokers(args):
    md = cluster_metadata(admin(args))
    return sorted(md.brokers.values(), key=lambda b: b.id)


def _api_versions(args) -> int:
    from kraft.protocol.messages.api_versions import ApiVersionsRequest
    req = ApiVersionsRequest(client_software_name="kraft-tools", client_software_version="1")
    for b in _brokers(args):
        resp = asyncio.run(_ask(b.host, b.port, req, API_VERSIONS_VERSION, args.timeout))
        for line in api_version_lines(f"{b.host}:{b.port} (id: {b.id} rack: null isFenced: false)", resp.api_keys):
            print(line)
    return 0


#: Kafka's tool prints the error's exception class (a failed directory: KIP-858)
_EXCEPTION_NAMES = {int(ErrorCode.KAFKA_STORAGE_ERROR): "org.apache.kafka.common.errors.KafkaStorageException"}


def log_dirs_json(per_broker: dict[int, list]) -> str:
    """Kafka's LogDirsCommand JSON from DescribeLogDirs results."""
    brokers = []
    for broker_id, results in sorted(per_broker.items()):
        dirs = []
        for r in results:
            err = None if r.error_code == 0 else _EXCEPTION_NAMES.get(r.error_code, ErrorCode(r.error_code).name)
            parts = [{"partition": f"{t.name}-{p.partition_index}", "size": p.partition_size,
                      "offsetLag": p.offset_lag, "isFuture": p.is_future_key}
                     for t in r.topics for p in t.partitions]
            dirs.append({"error": err, "logDir": r.log_dir, "partitions": parts})
        brokers.append({"broker": broker_id, "logDirs": dirs})
    return json.dumps({"brokers": brokers, "version": 1}, separators=(",", ":"))


def _log_dirs(args) -> int:
    from kraft.protocol.messages.describe_log_dirs import DescribeLogDirsRequest
    if not args.describe:
        raise ToolError("log-dirs needs --describe")
    topics = [t.strip() for t in (args.topic_list or "").split(",") if t.strip()]
    brokers = _brokers(args)
    wanted = {int(b) for b in args.broker_list.split(",")} if args.broker_list else {b.id for b in brokers}
    unknown = wanted - {b.id for b in brokers}
    if unknown:
        raise ToolError(f"ERROR: The given brokers do not exist from --broker-list: {','.join(map(str, sorted(unknown)))}."
                        f" Current existent brokers: {','.join(str(b.id) for b in brokers)}")
    print("Querying brokers for log directories information")
    req = DescribeLogDirsRequest(topics=None)
    per_broker = {}
    for b in brokers:
        if b.id in wanted:
            per_broker[b.id] = asyncio.run(_ask(b.host, b.port, req, DESCRIBE_LOG_DIRS_VERSION, args.timeout)).results
    if topics:
        for results in per_broker.values():
            for r in results:
                r.topics = [t for t in r.topics if t.name in topics]
    print(f"Received log directory information from brokers {','.join(str(b) for b in sorted(per_broker))}")
    print(log_dirs_json(per_broker))
    return 0


def _cluster(args) -> int:
    if args.cluster_command == "cluster-id":
        adm = admin(args)  # kept alive until the answer: a collected client fails its futures
        cluster = wait(adm.describe_cluster(), args.timeout)
        print(f"Cluster ID: {cluster.cluster_id}")
        return 0
    from kraft.client.quorum import parse_address
    from kraft.protocol.messages.broker_lifecycle import UnregisterBrokerRequest
    target = args.bootstrap_controller or args.bootstrap_server
    if not target:
        raise ToolError("unregister needs --bootstrap-server or --bootstrap-controller")
    host, port = parse_address(target.split(",")[0])
    resp = asyncio.run(_ask(host, port, UnregisterBrokerRequest(broker_id=args.id), UNREGISTER_BROKER_VERSION,
                            args.timeout))
    if resp.error_code == ErrorCode.UNSUPPORTED_VERSION and not args.bootstrap_controller:
        raise ToolError(f"{target} does not forward UnregisterBroker: use --bootstrap-controller")
    if resp.error_code:
        raise ToolError(f"{ErrorCode(resp.error_code).name}: {resp.error_message or 'unregister refused'}")
    print(f"Broker {args.id} is no longer registered.")
    return 0


def register(sub) -> None:
    p = sub.add_parser("broker-api-versions", help="each broker's API version ranges (kafka-broker-api-versions.sh)")
    add_connection_args(p)
    p.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for each broker")
    p.set_defaults(func=_api_versions)

    p = sub.add_parser("log-dirs", help="the log directories of brokers and their partitions (kafka-log-dirs.sh)")
    add_connection_args(p)
    p.add_argument("--describe", action="store_true", help="describe the log directories")
    p.add_argument("--broker-list", metavar="ID,ID", help="brokers to ask (default: all)")
    p.add_argument("--topic-list", metavar="T,T", help="topics to show (default: all)")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for each broker")
    p.set_defaults(func=_log_dirs)

    p = sub.add_parser("cluster", help="the cluster id, unregister a broker (kafka-cluster.sh)")
    csub = p.add_subparsers(dest="cluster_command", metavar="COMMAND", required=True)
    c = csub.add_parser("cluster-id", help="print the cluster id")
    add_connection_args(c)
    c.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for an answer")
    c.set_defaults(func=_cluster)
    u = csub.add_parser("unregister", help="unregister a broker that is gone for good")
    add_connection_args(u, required=False)
    u.add_argument("--bootstrap-controller", metavar="HOST:PORT", help="a controller to send the request to")
    u.add_argument("--id", type=int, required=True, help="the broker id to unregister")
    u.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for an answer")
    u.set_defaults(func=_cluster)
