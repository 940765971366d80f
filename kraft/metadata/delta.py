"""``MetadataDelta``: records replayed on top of an image, then applied to make the next image.

Kafka's ``MetadataDelta`` in Python: one sub-delta per image part, created on first use, so
``apply()`` reuses every part no record touched. Records are dispatched on their class.

Atomic groups (KIP-868): records between ``BeginTransactionRecord`` and
``EndTransactionRecord`` are held back and replayed together at the end; an
``AbortTransactionRecord`` drops them. ``apply()`` while a transaction is open gives the image
without it; pass ``open_transaction`` on to the next delta to carry it over.

Errors: a record that does not fit (see :class:`MetadataReplayError`) leaves the delta as it
was. When it is found while replaying a committed transaction the transaction is dropped; if
records of it before the bad one are already in, the delta refuses further use (Kafka treats any
replay failure as a fault of the metadata loader). This module must not do I/O.
"""

from __future__ import annotations

from kraft.errors import MetadataReplayError
from kraft.metadata import records as R
from kraft.metadata.acls import AclsDelta
from kraft.metadata.client_quotas import ClientQuotasDelta
from kraft.metadata.cluster import ClusterDelta
from kraft.metadata.configs import TOPIC, ConfigurationsDelta
from kraft.metadata.features import FeaturesDelta
from kraft.metadata.image import EMPTY_IMAGE, MetadataImage
from kraft.metadata.producer_ids import ProducerIdsDelta
from kraft.metadata.scram import ScramDelta
from kraft.metadata.topics import TopicsDelta


class MetadataDelta:
    __slots__ = ("image", "_features", "_cluster", "_topics", "_configs", "_client_quotas", "_acls",
                 "_producer_ids", "_scram", "_transaction", "_broken")

    def __init__(self, image: MetadataImage = EMPTY_IMAGE, open_transaction: tuple | None = None):
        self.image = image
        self._features = self._cluster = self._topics = self._configs = None
        self._client_quotas = self._acls = self._producer_ids = self._scram = None
        # Records of an open transaction, or None outside one.
        self._transaction: list | None = None if open_transaction is None else list(open_transaction)
        self._broken: str | None = None

    # --- sub-deltas, created on first use; None means "that part is unchanged" ---

    @property
    def features_delta(self) -> FeaturesDelta | None:
        return self._features

    @property
    def cluster_delta(self) -> ClusterDelta | None:
        return self._cluster

    @property
    def topics_delta(self) -> TopicsDelta | None:
        return self._topics

    @property
    def configs_delta(self) -> ConfigurationsDelta | None:
        return self._configs

    @property
    def client_quotas_delta(self) -> ClientQuotasDelta | None:
        return self._client_quotas

    @property
    def acls_delta(self) -> AclsDelta | None:
        return self._acls

    @property
    def producer_ids_delta(self) -> ProducerIdsDelta | None:
        return self._producer_ids

    @property
    def scram_delta(self) -> ScramDelta | None:
        return self._scram

    def _features_d(self) -> FeaturesDelta:
        if self._features is None:
            self._features = FeaturesDelta(self.image.features)
        return self._features

    def _cluster_d(self) -> ClusterDelta:
        if self._cluster is None:
            self._cluster = ClusterDelta(self.image.cluster)
        return self._cluster

    def _topics_d(self) -> TopicsDelta:
        if self._topics is None:
            self._topics = TopicsDelta(self.image.topics)
        return self._topics

    def _configs_d(self) -> ConfigurationsDelta:
        if self._configs is None:
            self._configs = ConfigurationsDelta(self.image.configs)
        return self._configs

    def _client_quotas_d(self) -> ClientQuotasDelta:
        if self._client_quotas is None:
            self._client_quotas = ClientQuotasDelta(self.image.client_quotas)
        return self._client_quotas

    def _acls_d(self) -> AclsDelta:
        if self._acls is None:
            self._acls = AclsDelta(self.image.acls)
        return self._acls

    def _producer_ids_d(self) -> ProducerIdsDelta:
        if self._producer_ids is None:
            self._producer_ids = ProducerIdsDelta(self.image.producer_ids)
        return self._producer_ids

    def _scram_d(self) -> ScramDelta:
        if self._scram is None:
            self._scram = ScramDelta(self.image.scram)
        return self._scram

    # --- replay ---

    @property
    def in_transaction(self) -> bool:
        return self._transaction is not None

    @property
    def open_transaction(self) -> tuple | None:
        """The held-back records of an open transaction (None outside one)."""
        return None if self._transaction is None else tuple(self._transaction)

    def replay(self, record) -> None:
        """Replay one record (a ``MetadataRecord``). MetadataReplayError if it does not fit."""
        if self._broken is not None:
            raise MetadataReplayError(f"delta unusable after a failed transaction: {self._broken}")
        kind = type(record)
        handler = _HANDLERS.get(kind)
        if handler is None:
            raise MetadataReplayError(f"cannot replay {kind.__name__}: not a metadata record")
        if self._transaction is not None and kind not in _TRANSACTION_MARKERS:
            self._transaction.append(record)
            return
        handler(self, record)

    def replay_registration(self, topic_id, partition_id: int, registration) -> None:
        """``replay(PartitionRecord)`` when the record is already decoded into its
        ``PartitionRegistration`` (the batch decoder's fast path); inside a transaction the
        caller must replay the record itself, which this refuses."""
        if self._broken is not None or self._transaction is not None:
            raise MetadataReplayError("replay_registration needs a delta outside a transaction")
        topics = self._topics
        if topics is None:
            topics = self._topics_d()
        topics.replay_registration(topic_id, partition_id, registration)

    def replay_change_body(self, topic_id, partition_id: int, body: bytes, record_of) -> None:
        """``replay(PartitionChangeRecord)`` known by its value's body (the bytes after its ids,
        header included): equal bodies on equal registrations merge once (``record_of()`` makes
        the record then). Outside a transaction only, like ``replay_registration``."""
        if self._broken is not None or self._transaction is not None:
            raise MetadataReplayError("replay_change_body needs a delta outside a transaction")
        topics = self._topics
        if topics is None:
            topics = self._topics_d()
        topics.replay_change_body(topic_id, partition_id, body, record_of)

    def replay_all(self, records) -> None:
        replay = self.replay
        for record in records:
            replay(record)

    def _begin(self, record) -> None:
        if self._transaction is not None:
            raise MetadataReplayError("BeginTransactionRecord inside an open transaction")
        self._transaction = []

    def _end(self, record) -> None:
        if self._transaction is None:
            raise MetadataReplayError("EndTransactionRecord without a BeginTransactionRecord")
        held, self._transaction = self._transaction, None
        for i, rec in enumerate(held):
            try:
                _HANDLERS[type(rec)](self, rec)  # only known record types are ever held
            except MetadataReplayError as e:
                error = e
            else:
                continue
            if i > 0:
                self._broken = f"record {i} of a transaction of {len(held)}: {error}"
            raise error

    def _abort(self, record) -> None:
        if self._transaction is None:
            raise MetadataReplayError("AbortTransactionRecord without a BeginTransactionRecord")
        self._transaction = None

    def _ignore(self, record) -> None:
        pass

    def _remove_topic(self, record) -> None:
        name = self._topics_d().replay_remove_topic(record)
        self._configs_d().delete_all(TOPIC, name)

    # --- apply ---

    def apply(self) -> MetadataImage:
        """The next image. Parts no record touched are the same objects as in ``image``."""
        if self._broken is not None:
            raise MetadataReplayError(f"delta unusable after a failed transaction: {self._broken}")
        image = self.image
        return MetadataImage(
            image.features if self._features is None else self._features.apply(),
            image.cluster if self._cluster is None else self._cluster.apply(),
            image.topics if self._topics is None else self._topics.apply(),
            image.configs if self._configs is None else self._configs.apply(),
            image.client_quotas if self._client_quotas is None else self._client_quotas.apply(),
            image.acls if self._acls is None else self._acls.apply(),
            image.producer_ids if self._producer_ids is None else self._producer_ids.apply(),
            image.scram if self._scram is None else self._scram.apply(),
        )


_TRANSACTION_MARKERS = frozenset({R.BeginTransactionRecord, R.EndTransactionRecord, R.AbortTransactionRecord})

D = MetadataDelta
_HANDLERS = {
    R.FeatureLevelRecord: lambda d, r: d._features_d().replay(r),
    R.RegisterBrokerRecord: lambda d, r: d._cluster_d().replay_register(r),
    R.UnregisterBrokerRecord: lambda d, r: d._cluster_d().replay_unregister(r),
    R.FenceBrokerRecord: lambda d, r: d._cluster_d().replay_fence(r),
    R.UnfenceBrokerRecord: lambda d, r: d._cluster_d().replay_unfence(r),
    R.BrokerRegistrationChangeRecord: lambda d, r: d._cluster_d().replay_registration_change(r),
    R.RegisterControllerRecord: lambda d, r: d._cluster_d().replay_register_controller(r),
    R.TopicRecord: lambda d, r: d._topics_d().replay_topic(r),
    R.PartitionRecord: lambda d, r: d._topics_d().replay_partition(r),
    R.PartitionChangeRecord: lambda d, r: d._topics_d().replay_partition_change(r),
    R.RemoveTopicRecord: D._remove_topic,
    R.ConfigRecord: lambda d, r: d._configs_d().replay(r),
    R.ClientQuotaRecord: lambda d, r: d._client_quotas_d().replay(r),
    R.AccessControlEntryRecord: lambda d, r: d._acls_d().replay(r),
    R.RemoveAccessControlEntryRecord: lambda d, r: d._acls_d().replay_remove(r),
    R.ProducerIdsRecord: lambda d, r: d._producer_ids_d().replay(r),
    R.BeginTransactionRecord: D._begin,
    R.EndTransactionRecord: D._end,
    R.AbortTransactionRecord: D._abort,
    R.NoOpRecord: D._ignore,
    R.UserScramCredentialRecord: lambda d, r: d._scram_d().replay(r),
    R.RemoveUserScramCredentialRecord: lambda d, r: d._scram_d().replay_remove(r),
    # Decoded but not (yet) part of the image: delegation tokens and the ZK migration state.
    # Replaying them is allowed so real Kafka logs load.
    R.DelegationTokenRecord: D._ignore,
    R.RemoveDelegationTokenRecord: D._ignore,
    R.ZkMigrationStateRecord: D._ignore,
}
del D
assert set(_HANDLERS) == set(R.METADATA_RECORDS.values()), "every metadata record needs a handler"
