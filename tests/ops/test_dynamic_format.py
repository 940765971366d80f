"""``kraft storage format`` for a dynamic quorum (KIP-853): ``--standalone``,
``--initial-controllers`` and ``--no-initial-controllers`` write (or not) Kafka's 0-0 bootstrap
checkpoint with the KRaftVersion and Voters records, and the metadata directory's
``directory.id`` is the one the voter set names."""

from __future__ import annotations

import os

import pytest

from kraft.cli import main
from kraft.log.formatting import random_uuid
from kraft.log.replicated_log import METADATA_DIR
from kraft.log.state_files import MetaProperties, uuid_text_to_bytes
from kraft.raft.control_state import ControlState, control_records
from kraft.raft.voters import VoterSet
from kraft.records import KRaftVersionRecord, VotersRecord
from kraft.types import Endpoint

CHECKPOINT = "00000000000000000000-0000000000.checkpoint"


def _props(tmp_path, node_id=1, port=19091, **extra):
    path = tmp_path / f"s{node_id}.properties"
    props = {"process.roles": "controller", "node.id": str(node_id),
             "listeners": f"CONTROLLER://127.0.0.1:{port}", "controller.listener.names": "CONTROLLER",
             "log.dirs": str(tmp_path / f"d{node_id}"), **extra}
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return str(path)


def _format(*args, capsys):
    code = main(["storage", "format", "-t", CLUSTER, *args])
    out = capsys.readouterr()
    return code, out.out + out.err


CLUSTER = random_uuid()
BOOT = {"controller.quorum.bootstrap.servers": "127.0.0.1:19091"}


def _voters(tmp_path, node_id=1):
    d = tmp_path / f"d{node_id}"
    with open(d / METADATA_DIR / CHECKPOINT, "rb") as f:
        data = f.read()
    msgs = [m for _, m in control_records(data)]
    meta = MetaProperties.read(str(d / "meta.properties"))
    return msgs, meta


def test_standalone_names_this_node_with_its_directory_and_listener(tmp_path, capsys):
    code, out = _format("-c", _props(tmp_path, **BOOT), "--standalone", capsys=capsys)
    assert code == 0, out
    msgs, meta = _voters(tmp_path)
    assert isinstance(msgs[0], KRaftVersionRecord) and msgs[0].kraft_version == 1
    assert isinstance(msgs[1], VotersRecord)
    (v,) = msgs[1].voters
    assert v.voter_id == 1 and v.directory_id == uuid_text_to_bytes(meta.directory_id)
    assert v.endpoints == (Endpoint("CONTROLLER", "127.0.0.1", 19091),)
    c = ControlState(VoterSet([]))
    c.load_snapshot(open(tmp_path / "d1" / METADATA_DIR / CHECKPOINT, "rb").read(), 0)
    assert c.voters.last().ids == {1} and c.voters.last_offset() == -1 and c.kraft_version == 1


def test_initial_controllers_give_this_node_its_directory_id(tmp_path, capsys):
    ids = {i: random_uuid() for i in (1, 2, 3)}
    spec = ",".join(f"{i}@127.0.0.1:{19090 + i}:{ids[i]}" for i in ids)
    code, out = _format("-c", _props(tmp_path, node_id=2, port=19092, **BOOT), "--initial-controllers", spec,
                        capsys=capsys)
    assert code == 0, out
    msgs, meta = _voters(tmp_path, 2)
    assert meta.directory_id == ids[2]
    assert [(v.voter_id, v.directory_id) for v in msgs[1].voters] == [(i, uuid_text_to_bytes(ids[i])) for i in ids]


def test_no_initial_controllers_writes_no_voters(tmp_path, capsys):
    code, out = _format("-c", _props(tmp_path, **BOOT), "--no-initial-controllers", capsys=capsys)
    assert code == 0, out
    assert not os.path.exists(tmp_path / "d1" / METADATA_DIR / CHECKPOINT)
    assert MetaProperties.read(str(tmp_path / "d1" / "meta.properties")).directory_id


@pytest.mark.parametrize("args, props, message", [
    ((), BOOT, "needs one of --standalone"),
    (("--standalone",), {"controller.quorum.voters": "1@127.0.0.1:19091"}, "static quorum"),
    (("--initial-controllers", "1@127.0.0.1:19091:nope"), BOOT, "id@host:port:directory-id"),
])
def test_refusals_write_nothing(tmp_path, capsys, args, props, message):
    code, out = _format("-c", _props(tmp_path, **props), *args, capsys=capsys)
    assert code == 1 and message in out
    assert not os.path.exists(tmp_path / "d1" / "meta.properties")


def test_flags_are_exclusive(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["storage", "format", "-t", CLUSTER, "-c", _props(tmp_path, **BOOT), "--standalone",
              "--no-initial-controllers"])
