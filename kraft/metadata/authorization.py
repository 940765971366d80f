"""The one place that knows whether this node authorizes requests, and what Kafka answers about
authorization when it does not (``authorizer.class.name`` empty, Kafka's default).

The authorizer itself is ``kraft.metadata.authorizer`` (Kafka's StandardAuthorizer, the only
non-empty ``authorizer.class.name`` a node accepts; ``kraft.server.authz_handler`` applies it per
API). Without one, Kafka's
brokers and controllers answer CreateAcls, DeleteAcls and DescribeAcls with SECURITY_DISABLED
(``AclApis``) instead of storing ACLs nothing enforces, and report every operation a resource
type supports as authorized (``AuthHelper.authorizedOperations``); an authorized-operations
field that was not asked for stays Integer.MIN_VALUE. Pure data and functions.
"""

from __future__ import annotations

from kraft.protocol.messages.acls import (OPERATION_ALTER, OPERATION_ALTER_CONFIGS, OPERATION_CLUSTER_ACTION,
                                          OPERATION_CREATE, OPERATION_CREATE_TOKENS, OPERATION_DELETE,
                                          OPERATION_DESCRIBE, OPERATION_DESCRIBE_CONFIGS, OPERATION_DESCRIBE_TOKENS,
                                          OPERATION_IDEMPOTENT_WRITE, OPERATION_READ, OPERATION_WRITE,
                                          RESOURCE_CLUSTER, RESOURCE_DELEGATION_TOKEN, RESOURCE_GROUP, RESOURCE_TOPIC,
                                          RESOURCE_TRANSACTIONAL_ID, RESOURCE_USER)

AUTHORIZER_CONFIG = "authorizer.class.name"
#: Kafka's messages with SECURITY_DISABLED (AclApis): the ACL writes, and DescribeAcls
NO_AUTHORIZER = "No Authorizer is configured."
NO_AUTHORIZER_ON_BROKER = "No Authorizer is configured on the broker"
#: an authorized-operations field nobody asked for (Kafka's Integer.MIN_VALUE)
NOT_REQUESTED = -(1 << 31)

#: Kafka's ``AclEntry.supportedOperations`` by resource type
SUPPORTED_OPERATIONS = {
    RESOURCE_TOPIC: (OPERATION_READ, OPERATION_WRITE, OPERATION_CREATE, OPERATION_DESCRIBE, OPERATION_DELETE,
                     OPERATION_ALTER, OPERATION_DESCRIBE_CONFIGS, OPERATION_ALTER_CONFIGS),
    RESOURCE_GROUP: (OPERATION_READ, OPERATION_DESCRIBE, OPERATION_DELETE, OPERATION_DESCRIBE_CONFIGS,
                     OPERATION_ALTER_CONFIGS),
    RESOURCE_CLUSTER: (OPERATION_CREATE, OPERATION_CLUSTER_ACTION, OPERATION_DESCRIBE_CONFIGS,
                       OPERATION_ALTER_CONFIGS, OPERATION_IDEMPOTENT_WRITE, OPERATION_ALTER, OPERATION_DESCRIBE),
    RESOURCE_TRANSACTIONAL_ID: (OPERATION_DESCRIBE, OPERATION_WRITE),
    RESOURCE_DELEGATION_TOKEN: (OPERATION_DESCRIBE,),
    RESOURCE_USER: (OPERATION_CREATE_TOKENS, OPERATION_DESCRIBE_TOKENS),
}


def authorizer_configured(settings) -> bool:
    """Whether the node's settings (Kafka names) configure an authorizer."""
    return bool(str(settings.get(AUTHORIZER_CONFIG) or "").strip())


def authorized_operations(resource_type: int, requested: bool = True) -> int:
    """The authorized-operations bit field for a resource of ``resource_type`` (Kafka's
    ``Utils.to32BitField`` of the operation codes): with no authorizer, every operation the type
    supports; NOT_REQUESTED when the request did not ask."""
    if not requested:
        return NOT_REQUESTED
    return sum(1 << op for op in SUPPORTED_OPERATIONS[resource_type])
