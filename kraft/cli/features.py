"""``kraft features --bootstrap-server|--bootstrap-controller HOST:PORT describe``: the supported
ranges and finalized levels a node reports in ApiVersions v3, one line per feature as Kafka's
``kafka-features.sh describe`` prints them (metadata.version levels by release name).

``kraft features --bootstrap-controller HOST:PORT upgrade --feature NAME=LEVEL [--dry-run]``:
UpdateFeatures sent to the active controller, as Kafka's ``kafka-features.sh upgrade``.
``--feature kraft.version=1`` turns a static quorum (``controller.quorum.voters``) into a
dynamic one (Kafka 4.1), after which ``metadata-quorum add-controller / remove-controller /
reassign`` work. Prints Kafka's per-feature lines."""

from __future__ import annotations

import argparse
import asyncio

from kraft.client.quorum import QuorumClient, parse_address
from kraft.errors import ErrorCode, KraftError
from kraft.log.bootstrap import METADATA_VERSION, METADATA_VERSIONS
from kraft.protocol import ApiVersionsRequest, UpdateFeaturesRequest

UPDATE_FEATURES_VERSION = 1


def parse_feature(text: str) -> tuple[str, int]:
    """``NAME=LEVEL``; for metadata.version the level may be a release (``3.9-IV0``)."""
    name, sep, level = text.partition("=")
    name, level = name.strip(), level.strip()
    if name == METADATA_VERSION and level.upper() in METADATA_VERSIONS:
        return name, METADATA_VERSIONS[level.upper()]
    if not sep or not name or not level.lstrip("-").isdigit():
        raise KraftError(f"--feature: expected NAME=LEVEL, got {text!r}")
    return name, int(level)


async def update_features(bootstrap: str, updates, *, validate_only: bool = False, timeout_s: float = 30.0,
                          upgrade_type: int = 1):
    """Send UpdateFeatures to the quorum leader (the active controller); its response."""
    client = QuorumClient([parse_address(s) for s in bootstrap.split(",")])
    try:
        d = await client.describe(timeout_s)
        addr = client.nodes.get(d.leader_id)
        if addr is None:
            raise KraftError(f"no address known for the active controller {d.leader_id}")
        U = UpdateFeaturesRequest
        req = U(timeout_ms=int(timeout_s * 1000), validate_only=validate_only,
                feature_updates=[U.FeatureUpdate(feature=n, max_version_level=lvl, upgrade_type=upgrade_type)
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


def _update(op: str, args, updates, upgrade_type: int) -> int:
    """Kafka's ``FeatureCommand.update``: one line per feature, in name order."""
    names = [n for n, _ in updates]
    if len(set(names)) != len(names):
        raise KraftError(f"a feature was specified more than once: {', '.join(names)}")
    resp = asyncio.run(update_features(args.bootstrap_controller, updates, validate_only=args.dry_run,
                                       timeout_s=args.timeout, upgrade_type=upgrade_type))
    failed = 0
    by_name = {r.feature: r for r in resp.results}
    if resp.error_code:  # as Kafka's admin client: the request's error is every feature's
        by_name = {n: type(resp).Result(feature=n, error_code=resp.error_code, error_message=resp.error_message)
                   for n in names}
    for name, level in sorted(updates):
        r = by_name.get(name)
        what = f"disable {name}" if op == "disable" else f"{op} {name} to {level}"
        if r is None or r.error_code == 0:
            done = "disabled." if op == "disable" else f"{op}d to {level}."
            print(f"{name} {'can be' if args.dry_run else 'was'} {done}")
        else:
            failed += 1
            print(f"{'Can not' if args.dry_run else 'Could not'} {what}. "
                  f"{r.error_message or ErrorCode(r.error_code).name}")
    if failed:
        raise KraftError(f"{failed} out of {len(updates)} operation(s) failed.")
    return 0


def _upgrade(args) -> int:
    return _update("upgrade", args, [parse_feature(f) for f in args.feature], 1)


def _downgrade(args) -> int:
    return _update("downgrade", args, [parse_feature(f) for f in args.feature], 3 if args.unsafe else 2)


def _disable(args) -> int:
    return _update("disable", args, [(f.strip(), 0) for f in args.feature], 3 if args.unsafe else 2)


def _connection(p, default) -> None:
    """The connection options, accepted before the action (Kafka's place) or after it."""
    p.add_argument("--bootstrap-controller", "--bootstrap-server", dest="bootstrap_controller", default=default,
                   metavar="HOST:PORT[,HOST:PORT]",
                   help="broker or controller addresses (brokers forward to the active controller); required")
    p.add_argument("--timeout", type=float, default=default, help="seconds to wait for the change to commit (30)")


def _needs_bootstrap(fn):
    def run(args) -> int:
        if not args.bootstrap_controller:
            raise KraftError("features: --bootstrap-server (or --bootstrap-controller) HOST:PORT is required")
        return fn(args)
    return run


def register(sub) -> None:
    p = sub.add_parser("features", help="describe features, or upgrade finalized ones (e.g. kraft.version=1)")
    _connection(p, argparse.SUPPRESS)
    p.set_defaults(bootstrap_controller=None, timeout=30.0)
    ss = p.add_subparsers(dest="features_command", metavar="ACTION", required=True)
    d = ss.add_parser("describe", help="supported and finalized levels of every feature, as kafka-features.sh")
    _connection(d, argparse.SUPPRESS)
    d.set_defaults(func=_needs_bootstrap(_describe))
    u = ss.add_parser("upgrade", help="raise features to the given levels")
    u.add_argument("--feature", action="append", required=True, metavar="NAME=LEVEL",
                   help="e.g. kraft.version=1 (repeatable)")
    u.add_argument("--dry-run", action="store_true", help="validate only")
    _connection(u, argparse.SUPPRESS)
    u.set_defaults(func=_needs_bootstrap(_upgrade))
    d = ss.add_parser("downgrade", help="lower features to the given levels (refused where metadata would be lost)")
    d.add_argument("--feature", action="append", required=True, metavar="NAME=LEVEL",
                   help="e.g. group.version=0 (repeatable)")
    d.add_argument("--unsafe", action="store_true", help="allow a downgrade that may lose metadata")
    d.add_argument("--dry-run", action="store_true", help="validate only")
    _connection(d, argparse.SUPPRESS)
    d.set_defaults(func=_needs_bootstrap(_downgrade))
    x = ss.add_parser("disable", help="set features to level 0")
    x.add_argument("--feature", action="append", required=True, metavar="NAME", help="e.g. group.version (repeatable)")
    x.add_argument("--unsafe", action="store_true", help="allow a downgrade that may lose metadata")
    x.add_argument("--dry-run", action="store_true", help="validate only")
    _connection(x, argparse.SUPPRESS)
    x.set_defaults(func=_needs_bootstrap(_disable))
