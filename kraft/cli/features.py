"""``kraft features --bootstrap-server|--bootstrap-controller HOST:PORT describe``: the supported
ranges and finalized levels a node reports in ApiVersions v3, one line per feature as Kafka's
``kafka-features.sh describe`` prints them (metadata.version levels by release name).

``kraft features --bootstrap-controller HOST:PORT upgrade --feature NAME=LEVEL [--dry-run]``:
UpdateFeatures sent to the active controller, as Kafka's ``kafka-features.sh upgrade``.
``--feature kraft.version=1`` turns a static quorum (``controller.quorum.voters``) into a
dynamic one (Kafka 4.1), after which ``metadata-quorum add-controller / remove-controller /
reassign`` work. Prints Kafka's per-feature lines."""

from __future__ import annotations

import asyncio

from kraft.client.quorum import QuorumClient, parse_address
from kraft.errors import ErrorCode, KraftError
from kraft.log.bootstrap import METADATA_VERSION, METADATA_VERSIONS
from kraft.protocol import ApiVersionsRequest, UpdateFeaturesRequest

UPDATE_FEATURES_VERSION = 1


def parse_feature(text: str) -> tuple[str, int]:
    name, sep, level = text.partition("=")
    if not sep or not name.strip() or not level.strip().lstrip("-").isdigit():
        raise KraftError(f"--feature: expected NAME=LEVEL, got {text!r}")
    return name.strip(), int(level)


async def update_features(bootstrap: str, updates, *, validate_only: bool = False, timeout_s: float = 30.0):
    """Send UpdateFeatures to the quorum leader (the active controller); its response."""
    client = QuorumClient([parse_address(s) for s in bootstrap.split(",")])
    try:
        d = await client.describe(timeout_s)
        addr = client.nodes.get(d.leader_id)
        if addr is None:
            raise KraftError(f"no address known for the active controller {d.leader_id}")
        U = UpdateFeaturesRequest
        req = U(timeout_ms=int(timeout_s * 1000), validate_only=validate_only,
                feature_updates=[U.FeatureUpdate(feature=n, max_version_level=lvl, upgrade_type=1)
                                 for n, lvl in updates])
        return await client.client(addr).request(req, UPDATE_FEATURES_VERSION, timeout_ms=int(timeout_s * 1000) + 5000)
    finally:
        await client.close()


_RELEASE_OF_LEVEL = {level: name for name, level in METADATA_VERSIONS.items()}


def level_text(feature: str, level: int) -> str:
    """Kafka's ``levelToString``: metadata.version levels by release name, others as numbers."""
    if feature == METADATA_VERSION:
        return _RELEASE_OF_LEVEL.get(level, str(level))
    return str(level)


async def describe_features(bootstrap: str, timeout_s: float = 30.0):
    """ApiVersions v3 from the first address that answers: its response."""
    from kraft.client.node_client import NodeClient
    last = None
    for address in bootstrap.split(","):
        host, port = parse_address(address)
        client = NodeClient(host, port, client_id="kraft-features", request_timeout_ms=int(timeout_s * 1000))
        try:
            return await client.request(ApiVersionsRequest(client_software_name="kraft-features",
                                                           client_software_version="1"), 3)
        except KraftError as exc:
            last = exc
        finally:
            await client.close()
    raise KraftError(f"no node at {bootstrap} answered ApiVersions: {last}")


def describe_lines(resp) -> list[str]:
    finalized = {f.name: f.max_version_level for f in resp.finalized_features or ()}
    epoch = resp.finalized_features_epoch
    out = []
    for f in sorted(resp.supported_features or (), key=lambda f: f.name):
        out.append(f"Feature: {f.name}\tSupportedMinVersion: {level_text(f.name, f.min_version)}\t"
                   f"SupportedMaxVersion: {level_text(f.name, f.max_version)}\t"
                   f"FinalizedVersionLevel: {level_text(f.name, finalized.get(f.name, 0))}\t"
                   f"Epoch: {epoch if epoch is not None and epoch >= 0 else '-'}")
    return out


def _describe(args) -> int:
    resp = asyncio.run(describe_features(args.bootstrap_controller, args.timeout))
    if resp.error_code:
        raise KraftError(f"ApiVersions: {ErrorCode(resp.error_code).name}")
    for line in describe_lines(resp):
        print(line)
    return 0


def _upgrade(args) -> int:
    updates = [parse_feature(f) for f in args.feature]
    resp = asyncio.run(update_features(args.bootstrap_controller, updates, validate_only=args.dry_run,
                                       timeout_s=args.timeout))
    if resp.error_code:
        raise KraftError(f"UpdateFeatures: {ErrorCode(resp.error_code).name} {resp.error_message or ''}".strip())
    failed = 0
    by_name = {r.feature: r for r in resp.results}
    for name, level in updates:
        r = by_name.get(name)
        if r is None or r.error_code == 0:
            verb = "can be upgraded" if args.dry_run else "was upgraded"
            print(f"{name} {verb} to {level}.")
        else:
            failed += 1
            print(f"Could not upgrade {name} to {level}. {r.error_message or ErrorCode(r.error_code).name}")
    return 1 if failed else 0


def register(sub) -> None:
    p = sub.add_parser("features", help="describe features, or upgrade finalized ones (e.g. kraft.version=1)")
    p.add_argument("--bootstrap-controller", "--bootstrap-server", dest="bootstrap_controller", required=True,
                   metavar="HOST:PORT[,HOST:PORT]",
                   help="broker or controller addresses (describe asks the first that answers; upgrade goes to "
                        "the active controller, so give controllers)")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for the change to commit")
    ss = p.add_subparsers(dest="features_command", metavar="ACTION", required=True)
    d = ss.add_parser("describe", help="supported and finalized levels of every feature, as kafka-features.sh")
    d.set_defaults(func=_describe)
    u = ss.add_parser("upgrade", help="raise features to the given levels")
    u.add_argument("--feature", action="append", required=True, metavar="NAME=LEVEL",
                   help="e.g. kraft.version=1 (repeatable)")
    u.add_argument("--dry-run", action="store_true", help="validate only")
    u.set_defaults(func=_upgrade)
