"""ACLs in the image (Kafka's ``AclsImage``/``AclsDelta``), keyed by ACL id.

Removing an ACL that is neither in the image nor added in this delta is a replay error, as in
Kafka; one added and removed within a delta leaves no trace. This module must not know about
other parts of the image.
"""

from __future__ import annotations

import uuid
from typing import NamedTuple

from kraft.errors import MetadataReplayError


class StandardAcl(NamedTuple):
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int

    @classmethod
    def from_record(cls, r) -> "StandardAcl":
        return cls(r.resource_type, r.resource_name, r.pattern_type, r.principal, r.host, r.operation,
                   r.permission_type)


class AclsImage(NamedTuple):
    acls: dict  # uuid -> StandardAcl; never mutated


EMPTY_ACLS = AclsImage({})


class AclsDelta:
    __slots__ = ("image", "changes")

    def __init__(self, image: AclsImage):
        self.image = image
        self.changes: dict[uuid.UUID, StandardAcl | None] = {}  # None: removed

    def replay(self, record) -> None:
        self.changes[record.id] = StandardAcl.from_record(record)

    def replay_remove(self, record) -> None:
        acl_id = record.id
        if acl_id in self.image.acls:
            self.changes[acl_id] = None
        elif self.changes.get(acl_id) is not None:
            del self.changes[acl_id]  # added and removed within this delta
        else:
            raise MetadataReplayError(f"cannot remove ACL {acl_id}: not in the image or this delta")

    def apply(self) -> AclsImage:
        if not self.changes:
            return self.image
        acls = dict(self.image.acls)
        for acl_id, acl in self.changes.items():
            if acl is None:
                acls.pop(acl_id, None)
            else:
                acls[acl_id] = acl
        return AclsImage(acls)
