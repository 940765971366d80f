"""Kafka 4.1's static-to-dynamic quorum upgrade with real `kraft server start` processes: a
quorum configured with ``controller.quorum.voters`` (kraft.version 0) refuses voter changes
with UNSUPPORTED_VERSION; ``kraft features upgrade --feature kraft.version=1`` writes the
Voters record from the static set (with the directory ids in the voters' meta.properties and
their configured listeners); then ``remove-controller`` works, and a restart keeps it."""

from __future__ import annotations

import pytest

from kraft.cli.local_cluster import LocalCluster, wait_for
from kraft.errors import ErrorCode
from kraft.protocol.primitives import uuid_to_base64

from .quorum_helpers import describe, run, write_batches
from .test_dynamic_quorum import FAST, assert_one_leader_per_epoch

pytestmark = pytest.mark.integration


def test_static_quorum_upgrades_to_kraft_version_1_then_changes_voters(tmp_path, capsys):
    from kraft.cli import main
    from kraft.client.quorum import QuorumClient
    from kraft.client.voter_changes import VoterChangeError, remove_voter
    from kraft.log.state_files import uuid_text_to_bytes

    cluster = LocalCluster(str(tmp_path / "static"), 3, overrides=FAST).create()
    boot = ",".join(f"127.0.0.1:{cluster.ports[i]}" for i in cluster.ids)
    try:
        cluster.start()
        acked = run(write_batches(cluster, 3, tag="static"))
        d = run(describe(cluster, 30))
        victim = next(i for i in (1, 2, 3) if i != d.leader_id)
        # Static: voter changes are refused with Kafka's error.
        async def remove():
            client = QuorumClient([cluster.address(i) for i in cluster.ids])
            try:
                await remove_voter(client, victim, uuid_text_to_bytes(cluster.directory_id(victim)), deadline_s=5)
            finally:
                await client.close()
        with pytest.raises(VoterChangeError) as refused:
            run(remove())
        assert refused.value.code == ErrorCode.UNSUPPORTED_VERSION

        capsys.readouterr()

        def described():
            assert main(["features", "--bootstrap-controller", boot, "describe"]) == 0
            return capsys.readouterr().out.splitlines()
        # The writes above go to the Raft log directly and may commit before the new active
        # controller's bootstrap records (metadata.version); node 1 answers from its image, so
        # wait until that has them (a CI run read the image at offset 30 without them).
        before = wait_for(lambda: (lines := described()) and any(
            line.startswith("Feature: metadata.version\t") and "FinalizedVersionLevel: 3.9-IV0" in line
            for line in lines) and lines, 10, 0.2) or described()
        kv = [line for line in before if line.startswith("Feature: kraft.version\t")]
        assert kv and "SupportedMaxVersion: 1\tFinalizedVersionLevel: 0\t" in kv[0], before
        mv = [line for line in before if line.startswith("Feature: metadata.version\t")]
        assert mv and "SupportedMinVersion: 3.3-IV3\t" in mv[0] and "FinalizedVersionLevel: 3.9-IV0" in mv[0], before
        assert main(["features", "--bootstrap-controller", boot, "upgrade", "--feature", "kraft.version=1",
                     "--dry-run"]) == 0
        assert "kraft.version can be upgraded to 1." in capsys.readouterr().out
        assert main(["features", "--bootstrap-controller", boot, "upgrade", "--feature", "kraft.version=1"]) == 0
        assert "kraft.version was upgraded to 1." in capsys.readouterr().out
        assert wait_for(lambda: main(["features", "--bootstrap-controller", boot, "describe"]) == 0 and any(
            line.startswith("Feature: kraft.version\t") and "FinalizedVersionLevel: 1\t" in line
            for line in capsys.readouterr().out.splitlines()), 10, 0.2)
        # The voters now carry the directory ids of their meta.properties.
        d = run(describe(cluster, 10))
        assert {v.replica_id: uuid_to_base64(v.replica_directory_id) for v in d.voters} == {
            i: cluster.directory_id(i) for i in (1, 2, 3)}
        assert main(["features", "--bootstrap-controller", boot, "upgrade", "--feature", "kraft.version=0"]) == 1
        acked += run(write_batches(cluster, 3, tag="dynamic"))

        assert main(["metadata-quorum", "--bootstrap-controller", boot, "--timeout", "30", "remove-controller",
                     "--controller-id", str(victim), "--controller-directory-id", cluster.directory_id(victim)]) == 0
        assert wait_for(lambda: sorted(v.replica_id for v in run(describe(cluster, 10)).voters)
                        == sorted({1, 2, 3} - {victim}), 30)
        # controller.quorum.voters still names the victim, but the log's voters win across restarts.
        cluster.stop()
        cluster.start()
        d = run(describe(cluster, 30))
        assert sorted(v.replica_id for v in d.voters) == sorted({1, 2, 3} - {victim})
        acked += run(write_batches(cluster, 3, tag="restarted"))
        assert acked
        cluster.stop()
        assert_one_leader_per_epoch(cluster, (1, 2, 3))
    finally:
        cluster.close()
    assert not cluster.unexpected_exits(), {i: cluster.log_tail(i) for i in cluster.unexpected_exits()}
