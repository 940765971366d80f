"""Every controller request handler by API key, and the error answer of each API.

``HANDLERS[api_key](ctx, request) -> ControllerResult`` (see ``result.py``);
``ERROR_RESPONSES[api_key](request, version, code, message)`` is the answer carrying one error
code for the whole request (NOT_CONTROLLER, or an ``ApiError`` a handler raised).
``READ_ONLY`` APIs are answered from the committed image on any controller.
"""

from __future__ import annotations

from kraft.controller import broker_handlers, cluster_handlers, topic_handlers

HANDLERS = {**topic_handlers.HANDLERS, **broker_handlers.HANDLERS, **cluster_handlers.HANDLERS}
ERROR_RESPONSES = {**topic_handlers.ERROR_RESPONSES, **broker_handlers.ERROR_RESPONSES}
READ_ONLY = frozenset(cluster_handlers.HANDLERS)
#: APIs that need the active controller
WRITE_APIS = frozenset(HANDLERS) - READ_ONLY
