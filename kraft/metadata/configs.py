"""Dynamic configs in the image (Kafka's ``ConfigurationsImage``/``ConfigurationsDelta``).

Configs are keyed by resource ``(resource_type, resource_name)`` as in Kafka's
``ConfigResource`` (2 topic, 4 broker, 8 broker logger, 16 client metrics, 32 group). A
``ConfigRecord`` with a null value deletes the key; a resource left without keys leaves the
image. Deleting a topic deletes its configs. This module must not know about topics.
"""

from __future__ import annotations

from typing import NamedTuple

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32


class ConfigurationsImage(NamedTuple):
    resources: dict  # (resource_type, resource_name) -> {key: value}; never mutated

    def config(self, resource_type: int, resource_name: str) -> dict:
        return self.resources.get((resource_type, resource_name), {})


EMPTY_CONFIGS = ConfigurationsImage({})


class ConfigurationsDelta:
    __slots__ = ("image", "changes")

    def __init__(self, image: ConfigurationsImage):
        self.image = image
        self.changes: dict[tuple, dict[str, str | None]] = {}  # None: deleted

    def replay(self, record) -> None:
        resource = (record.resource_type, record.resource_name)
        self.changes.setdefault(resource, {})[record.name] = record.value

    def delete_all(self, resource_type: int, resource_name: str) -> None:
        """Every key of the resource goes (Kafka's ``ConfigurationDelta.deleteAll``)."""
        resource = (resource_type, resource_name)
        keys = self.image.resources.get(resource)
        if keys:
            self.changes[resource] = dict.fromkeys(keys)
        else:
            self.changes.pop(resource, None)

    def apply(self) -> ConfigurationsImage:
        if not self.changes:
            return self.image
        resources = dict(self.image.resources)
        for resource, changes in self.changes.items():
            config = dict(resources.get(resource, ()))
            for key, value in changes.items():
                if value is None:
                    config.pop(key, None)
                else:
                    config[key] = value
            if config:
                resources[resource] = config
            else:
                resources.pop(resource, None)
        return ConfigurationsImage(resources)
