"""Package-level rules: what kraft.protocol may import, and the ApiVersions table."""

import ast
import pathlib

import kraft.protocol as kp
from kraft.protocol import ApiKey, api_versions_response, api_versions_table
from kraft.protocol.message import REQUESTS, RESPONSES

PACKAGE = pathlib.Path(kp.__file__).parent


def _imports(path: pathlib.Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            yield node.module or ""


def test_protocol_imports_only_errors_from_kraft_and_no_io():
    """ARCHITECTURE.md: protocol/ may import errors, records and the native codec; never asyncio or
    sockets."""
    for path in PACKAGE.rglob("*.py"):
        for name in _imports(path):
            top = name.split(".")[0]
            assert top not in ("asyncio", "socket", "selectors", "threading"), (path, name)
            if top == "kraft":
                assert name in ("kraft.errors", "kraft.records", "kraft._native") or name.startswith("kraft.protocol"), (
                    path, name)


def test_protocol_files_stay_small():
    for path in PACKAGE.rglob("*.py"):
        assert len(path.read_text().splitlines()) < 600, path


def test_every_request_has_a_response_with_the_same_versions():
    assert set(REQUESTS) == set(RESPONSES)
    for api_key, request in REQUESTS.items():
        response = RESPONSES[api_key]
        assert (request.MIN_VERSION, request.MAX_VERSION) == (response.MIN_VERSION, response.MAX_VERSION)
        assert request.FLEXIBLE == response.FLEXIBLE
        assert ApiKey(api_key).name.replace("_", "") == request.__name__[:-len("Request")].upper()


def test_api_versions_table_lists_every_registered_request():
    table = api_versions_table()
    assert [(e.api_key, e.min_version, e.max_version) for e in table] == [
        (k, REQUESTS[k].MIN_VERSION, REQUESTS[k].MAX_VERSION) for k in sorted(REQUESTS)]
    assert (18, 0, 4) in [(e.api_key, e.min_version, e.max_version) for e in table]


def test_api_versions_table_by_role():
    controller = {e.api_key for e in api_versions_table("controller")}
    broker = {e.api_key for e in api_versions_table("broker")}
    raft = {ApiKey.VOTE, ApiKey.BEGIN_QUORUM_EPOCH, ApiKey.END_QUORUM_EPOCH, ApiKey.FETCH_SNAPSHOT}
    assert raft <= controller and not raft & broker
    assert {ApiKey.BROKER_REGISTRATION, ApiKey.BROKER_HEARTBEAT} <= controller - broker
    assert {ApiKey.PRODUCE, ApiKey.METADATA, ApiKey.LIST_OFFSETS} <= broker - controller
    assert {ApiKey.API_VERSIONS, ApiKey.FETCH, ApiKey.DESCRIBE_QUORUM} <= broker & controller


def test_api_versions_table_caps_and_filters():
    table = api_versions_table("broker", max_versions={ApiKey.FETCH: 16, ApiKey.PRODUCE: 1},
                               only={ApiKey.FETCH, ApiKey.PRODUCE, ApiKey.API_VERSIONS})
    assert [(e.api_key, e.min_version, e.max_version) for e in table] == [(1, 4, 16), (18, 0, 4)]
    response = api_versions_response("controller")
    assert response.error_code == 0
    assert kp.ApiVersionsResponse.decode(response.encode(3), 3) == response
