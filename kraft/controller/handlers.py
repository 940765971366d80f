"""Every controller request handler by API key, and the error answer of each API.

``HANDLERS[api_key](ctx, request) -> ControllerResult`` (see ``result.py``);
``ERROR_RESPONSES[api_key](request, version, code, message)`` is the answer carrying one error
code for the whole request (NOT_CONTROLLER, or an ``ApiError`` a handler raised).
``READ_ONLY`` APIs are answered from the committed image on any controller.
"""

from __future__ import annotations

from kraft.controller import (acls, admin_errors, alter_partition, alter_reassignments, broker_handlers, client_quotas,
                              cluster_handlers, configs, elect_leaders, features, log_directories, producer_ids,
                              reassignments, scram, topic_handlers)

HANDLERS = {**topic_handlers.HANDLERS, **broker_handlers.HANDLERS, **cluster_handlers.HANDLERS,
            **configs.HANDLERS, **acls.HANDLERS, **features.HANDLERS, **producer_ids.HANDLERS,
            **reassignments.HANDLERS, **alter_partition.HANDLERS, **elect_leaders.HANDLERS, **alter_reassignments.HANDLERS,
            **scram.HANDLERS, **client_quotas.HANDLERS, **log_directories.HANDLERS}
ERROR_RESPONSES = {**topic_handlers.ERROR_RESPONSES, **broker_handlers.ERROR_RESPONSES, **admin_errors.ERROR_RESPONSES,
                   **alter_partition.ERROR_RESPONSES, **elect_leaders.ERROR_RESPONSES,
                   **alter_reassignments.ERROR_RESPONSES, **reassignments.ERROR_RESPONSES,
                   **scram.ERROR_RESPONSES, **client_quotas.ERROR_RESPONSES, **log_directories.ERROR_RESPONSES}
# Pure reads: answered from the committed image on any controller (Kafka's controllers answer
# DescribeConfigs/DescribeAcls/ListPartitionReassignments/DescribeUserScramCredentials from their committed state too).
READ_ONLY = frozenset(cluster_handlers.HANDLERS) | {32, 29, 46, 50}
#: APIs that need the active controller
WRITE_APIS = frozenset(HANDLERS) - READ_ONLY
