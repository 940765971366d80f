"""The ApiVersions answer: which API keys and version ranges a node serves.

Built from the message registry, so adding a schema adds it here. A node passes its role
(``"broker"`` or ``"controller"``, Kafka's request "listeners") to expose only what that role
serves, and may cap or drop APIs whose handlers do not exist yet. This module must not decide
policy (which role serves what beyond the schema's LISTENERS): callers do.
"""

from __future__ import annotations

import kraft.protocol.messages  # noqa: F401  (registers every schema)
from kraft.errors import ErrorCode
from kraft.protocol.message import REQUESTS
from kraft.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse

ApiVersion = ApiVersionsResponse.ApiVersion


def api_versions_table(listener: str | None = None, *, only=None, max_versions=None) -> list[ApiVersion]:
    """``ApiVersionsResponse.api_keys`` for a node: one entry per registered request, sorted by key.

    ``listener`` keeps only requests whose LISTENERS include it (None keeps all); ``only`` is an
    optional set of API keys to keep; ``max_versions`` maps API key -> highest version to
    advertise (e.g. while a handler lacks a newer version's semantics).
    """
    table = []
    for api_key in sorted(REQUESTS):
        cls = REQUESTS[api_key]
        if listener is not None and listener not in cls.LISTENERS:
            continue
        if only is not None and api_key not in only:
            continue
        max_version = cls.MAX_VERSION
        if max_versions and api_key in max_versions:
            max_version = min(max_version, max_versions[api_key])
            if max_version < cls.MIN_VERSION:
                continue
        table.append(ApiVersion(api_key=api_key, min_version=cls.MIN_VERSION, max_version=max_version))
    return table


def api_versions_response(listener: str | None = None, **table_options) -> ApiVersionsResponse:
    """A successful ApiVersionsResponse carrying :func:`api_versions_table`."""
    return ApiVersionsResponse(error_code=int(ErrorCode.NONE), api_keys=api_versions_table(listener, **table_options))


def unsupported_api_versions_response() -> ApiVersionsResponse:
    """The answer to an ApiVersions request at a version we lack (sent at v0, see framing.py).
    Like Kafka it lists ApiVersions' own range, so the client knows what to retry with."""
    return ApiVersionsResponse(
        error_code=int(ErrorCode.UNSUPPORTED_VERSION),
        api_keys=[ApiVersion(api_key=ApiVersionsRequest.API_KEY, min_version=ApiVersionsRequest.MIN_VERSION,
                             max_version=ApiVersionsRequest.MAX_VERSION)])
