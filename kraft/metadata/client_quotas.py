"""Client quotas in the image (Kafka's ``ClientQuotasImage``/``ClientQuotasDelta``).

An entity is a set of ``(entity_type, entity_name)`` pairs (name None: the default entity),
kept as a tuple sorted by type; each entity maps quota keys to float values. ``remove`` deletes
a key; an entity without keys leaves the image. This module must not know about other parts.
"""

from __future__ import annotations

from typing import NamedTuple


def quota_entity(entity_data) -> tuple:
    """The image key of a ``ClientQuotaRecord.entity`` list (a later duplicate type wins, as
    with Kafka's map)."""
    return tuple(sorted({e.entity_type: e.entity_name for e in entity_data}.items(), key=lambda kv: kv[0]))


class ClientQuotasImage(NamedTuple):
    entities: dict  # entity tuple -> {key: float}; never mutated


EMPTY_CLIENT_QUOTAS = ClientQuotasImage({})


class ClientQuotasDelta:
    __slots__ = ("image", "changes")

    def __init__(self, image: ClientQuotasImage):
        self.image = image
        self.changes: dict[tuple, dict[str, float | None]] = {}  # None: removed

    def replay(self, record) -> None:
        entity = quota_entity(record.entity)
        self.changes.setdefault(entity, {})[record.key] = None if record.remove else record.value

    def apply(self) -> ClientQuotasImage:
        if not self.changes:
            return self.image
        entities = dict(self.image.entities)
        for entity, changes in self.changes.items():
            quotas = dict(entities.get(entity, ()))
            for key, value in changes.items():
                if value is None:
                    quotas.pop(key, None)
                else:
                    quotas[key] = value
            if quotas:
                entities[entity] = quotas
            else:
                entities.pop(entity, None)
        return ClientQuotasImage(entities)
