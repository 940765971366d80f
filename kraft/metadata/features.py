"""Finalized feature levels in the image (Kafka's ``FeaturesImage``/``FeaturesDelta``).

A ``FeatureLevelRecord`` sets a feature's level; level 0 removes the feature. This module must
not know about other parts of the image.
"""

from __future__ import annotations

from typing import NamedTuple

METADATA_VERSION = "metadata.version"


class FeaturesImage(NamedTuple):
    finalized_versions: dict  # feature name -> level (> 0); never mutated

    @property
    def metadata_version(self) -> int:
        """The ``metadata.version`` feature level, 0 when not set."""
        return self.finalized_versions.get(METADATA_VERSION, 0)


EMPTY_FEATURES = FeaturesImage({})


class FeaturesDelta:
    __slots__ = ("image", "changes")

    def __init__(self, image: FeaturesImage):
        self.image = image
        self.changes: dict[str, int | None] = {}  # None: removed

    def replay(self, record) -> None:
        self.changes[record.name] = record.feature_level or None

    def apply(self) -> FeaturesImage:
        if not self.changes:
            return self.image
        levels = dict(self.image.finalized_versions)
        for name, level in self.changes.items():
            if level is None:
                levels.pop(name, None)
            else:
                levels[name] = level
        return FeaturesImage(levels)
