"""The immutable metadata image (Kafka's ``MetadataImage``): every part of the cluster's state.

An image is a named tuple of part images; no part is ever mutated after construction, so two
images share every part (and every topic, partition and broker registration) that a delta did
not touch. Build the next image with ``MetadataDelta(image)``, ``replay`` and ``apply``.
This module must not know about records or their framing.
"""

from __future__ import annotations

from typing import NamedTuple

from kraft.metadata.acls import EMPTY_ACLS, AclsImage
from kraft.metadata.client_quotas import EMPTY_CLIENT_QUOTAS, ClientQuotasImage
from kraft.metadata.cluster import EMPTY_CLUSTER, ClusterImage
from kraft.metadata.configs import EMPTY_CONFIGS, ConfigurationsImage
from kraft.metadata.features import EMPTY_FEATURES, FeaturesImage
from kraft.metadata.producer_ids import EMPTY_PRODUCER_IDS, ProducerIdsImage
from kraft.metadata.scram import EMPTY_SCRAM, ScramImage
from kraft.metadata.topics import EMPTY_TOPICS, TopicsImage


class MetadataImage(NamedTuple):
    features: FeaturesImage
    cluster: ClusterImage
    topics: TopicsImage
    configs: ConfigurationsImage
    client_quotas: ClientQuotasImage
    acls: AclsImage
    producer_ids: ProducerIdsImage
    scram: ScramImage = EMPTY_SCRAM

    @property
    def is_empty(self) -> bool:
        return self == EMPTY_IMAGE


EMPTY_IMAGE = MetadataImage(EMPTY_FEATURES, EMPTY_CLUSTER, EMPTY_TOPICS, EMPTY_CONFIGS, EMPTY_CLIENT_QUOTAS,
                            EMPTY_ACLS, EMPTY_PRODUCER_IDS, EMPTY_SCRAM)
