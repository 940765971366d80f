"""Issue 37 item 4, the command line's rough edges: each was seen by hand and each test here
failed on the code before the fix (noted per test)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kraft.cli import describe_failure
from kraft.errors import KraftError


def test_a_multi_line_error_keeps_its_reason_on_the_one_line():
    """Before: ``reassign-partitions`` with an unknown broker printed only
    "error: Error reassigning partition(s):", the reason being on the next line."""
    exc = KraftError("Error reassigning partition(s):\nt-0: Replica 9 is not an available broker\n")
    assert describe_failure(exc) == "Error reassigning partition(s): t-0: Replica 9 is not an available broker"
    assert describe_failure(KraftError("\nonly the second line")) == "only the second line"


@pytest.mark.parametrize("command", [
    ["metadata-quorum", "--bootstrap-controller", "127.0.0.1:99999", "describe", "--status"],
    ["produce", "--bootstrap-controller", "127.0.0.1:99999"],
    ["leader-election", "--bootstrap-server", "127.0.0.1:99999", "--election-type", "preferred",
     "--all-topic-partitions"],
    ["topics", "--bootstrap-server", "127.0.0.1:99999", "--list"],
])
def test_a_port_out_of_range_is_one_error_line(command):
    """Before: a 40-line traceback ending in "OverflowError: connect(): port must be 0-65535"."""
    p = subprocess.run([sys.executable, "-m", "kraft", *command], capture_output=True, text=True, timeout=60)
    assert p.returncode == 1, p.stderr
    assert "Traceback" not in p.stderr and p.stderr.count("\n") == 1, p.stderr
    assert "99999" in p.stderr and "out of range" in p.stderr


def test_storage_format_and_info_name_a_misspelled_key(tmp_path, capsys):
    """Before: only ``server start`` warned; format and info said nothing of the typo."""
    from kraft.cli import main
    cfg = tmp_path / "server.properties"
    cfg.write_text("process.roles=controller\nnode.id=1\ncontroller.quorum.voters=1@127.0.0.1:19093\n"
                   "listeners=CONTROLLER://127.0.0.1:19093\ncontroller.listener.names=CONTROLLER\n"
                   f"log.dirs={tmp_path / 'd1'}\ncontroller.quorum.elecion.timeout.ms=300\n")
    for command in (["storage", "format", "-t", "kMQYFJSSTZSKAd-CzV5o-g", "-c", str(cfg)],
                    ["storage", "info", "-c", str(cfg)]):
        capsys.readouterr()
        assert main(command) == 0
        err = capsys.readouterr().err
        assert "warning: unknown configuration controller.quorum.elecion.timeout.ms ignored" in err, err


def test_dump_log_shows_a_voters_directory_id_in_base64_as_describe_does(tmp_path, capsys):
    """Before: dump-log printed directory ids in hex, ``describe --status`` in Kafka's base64."""
    import base64
    from kraft import records
    from kraft.cli import main
    from kraft.log import LogConfig, SegmentedLog
    from kraft.records.control import Voter, VotersRecord
    from kraft.types import Endpoint
    dir_id = bytes(range(16))
    log = SegmentedLog.open(str(tmp_path), LogConfig())
    log.append(records.build_control_record_batch(
        VotersRecord(voters=(Voter(1, dir_id, (Endpoint("CONTROLLER", "localhost", 9093),), 0, 1),)), timestamp=5),
        leader_epoch=1)
    log.close()
    capsys.readouterr()
    assert main(["dump-log", str(tmp_path / "00000000000000000000.log")]) == 0
    out = capsys.readouterr().out
    assert base64.urlsafe_b64encode(dir_id).decode().rstrip("=") in out
    assert dir_id.hex() not in out


def test_reassign_names_target_voters_that_no_node_has():
    """Before: ``reassign --target-voters 1,7`` with no node 7 was accepted and waited without a
    word. The command now says which ids nothing fetches for and what the wait needs."""
    from types import SimpleNamespace as NS
    from kraft.cli.metadata_quorum import absent_targets, absent_targets_note, parse_target_voters
    d = NS(voters=[NS(replica_id=1), NS(replica_id=2)], observers=[NS(replica_id=4)])
    assert absent_targets(d, parse_target_voters("1,4,7")) == [7]
    assert absent_targets(d, parse_target_voters("1,2,4")) == []
    note = absent_targets_note([7])
    assert "no node with id 7" in note and "--cancel" in note and "\n" not in note


def test_reassign_wait_shows_where_it_stands_on_a_terminal_only(monkeypatch):
    """Issue 37 item 6: ``reassign --wait`` was silent for minutes; on a terminal it now rewrites
    one status line per poll, and prints nothing of it into a pipe or a log."""
    from types import SimpleNamespace as NS
    from kraft.cli import metadata_quorum as mq
    d = NS(voters=[NS(replica_id=2), NS(replica_id=1)], target_voters=[NS(voter_id=3), NS(voter_id=1)],
           leader_id=1, leader_epoch=4)
    assert mq.reassign_progress_line(d, 12.4) == "voters [1, 2] -> target [1, 3], leader 1 in epoch 4, 12 s"
    monkeypatch.setattr("sys.stderr.isatty", lambda: False, raising=False)
    assert mq._terminal_progress() is None
