"""Admin writes sent to a broker, forwarded to the active controller (Kafka forwards them
too, in an Envelope; we send the request itself, KIP-590's "direct" variant): CreateTopics,
DeleteTopics, CreatePartitions, AlterConfigs, IncrementalAlterConfigs, CreateAcls and
DeleteAcls. The controller answers once the records committed; the broker passes that answer
back at the client's version. With no controller reachable within the request's timeout the
client gets NOT_CONTROLLER (librdkafka and the Java client refresh metadata and retry).
Everything else goes to the broker's own handlers; ApiVersions lists both.
"""

from __future__ import annotations

import logging

from kraft.broker.handlers import BROKER_APIS, BROKER_MAX_VERSIONS
from kraft.client.controller_client import ControllerClient
from kraft.controller.handlers import ERROR_RESPONSES
from kraft.errors import ErrorCode, KraftError
from kraft.protocol import ApiVersionsRequest, api_versions_response

log = logging.getLogger("kraft.broker.forwarding")

#: API keys a broker forwards to the active controller.
FORWARDED_APIS = frozenset({19, 20, 37, 33, 44, 30, 31})
DEFAULT_TIMEOUT_MS = 30_000


class ForwardingHandlers:
    def __init__(self, inner, client: ControllerClient):
        self.inner = inner
        self.client = client
        self.forwarded = 0

    def __getattr__(self, name):  # close(), on_flushed(), fetch... of the broker's handlers
        return getattr(self.inner, name)

    def handle(self, ctx, request):
        key = request.API_KEY
        if key in FORWARDED_APIS:
            return self._forward(request, ctx.header.api_version)
        if key == ApiVersionsRequest.API_KEY and ApiVersionsRequest.supports(ctx.header.api_version):
            return api_versions_response(None, only=BROKER_APIS | FORWARDED_APIS, max_versions=BROKER_MAX_VERSIONS)
        return self.inner.handle(ctx, request)

    async def _forward(self, request, version: int):
        timeout_ms = getattr(request, "timeout_ms", None) or DEFAULT_TIMEOUT_MS
        self.forwarded += 1
        try:
            return await self.client.call(request, version=version, deadline_s=max(1.0, timeout_ms / 1000))
        except KraftError as exc:
            log.warning("forwarding %s to the controller failed: %s", type(request).__name__, exc)
            return ERROR_RESPONSES[request.API_KEY](request, version, ErrorCode.NOT_CONTROLLER, str(exc))
