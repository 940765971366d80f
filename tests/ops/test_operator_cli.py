"""The operator's first hour: every mistake gets one line on stderr that names the setting or
path, a non-zero exit and no Python traceback (unless --verbose); format and start agree on
what is valid; format says what it wrote."""

from __future__ import annotations

import argparse
import json
import os
import socket
import shutil
import subprocess
import sys

import pytest
from ops_helpers import CLUSTER, kraft_env, run_kraft, write_config

from kraft.cli import build_parser, main
from kraft.log.bootstrap import BOOTSTRAP_FILE, read_bootstrap_checkpoint


def _kraft(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


# --- server start: each mistake in one line -------------------------------------------------------


def test_a_listener_port_in_use_is_one_line_naming_listeners(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        cfg = write_config(tmp_path, port=port)
        assert run_kraft("storage", "format", "-t", CLUSTER, "-c", cfg).returncode == 0
        p = run_kraft("server", "start", cfg)
    assert p.returncode == 1 and "Traceback" not in p.stderr
    errors = [line for line in p.stderr.splitlines() if "ERROR" in line or "error" in line]
    assert len(errors) == 1, p.stderr  # (INFO lines of the startup before it are fine)
    line = errors[0]
    assert "listeners:" in line and f"127.0.0.1:{port}" in line and "address already in use" in line


def test_a_missing_metadata_directory_is_one_line_saying_to_format(tmp_path):
    p = run_kraft("server", "start", write_config(tmp_path))
    assert p.returncode == 1
    line = _one_error_line(p.stderr)
    assert str(tmp_path / "meta") in line and "does not exist" in line and "kraft storage format" in line


def test_an_unformatted_directory_is_one_line_saying_to_format(tmp_path):
    (tmp_path / "meta").mkdir()
    (tmp_path / "d1").mkdir()
    p = run_kraft("server", "start", write_config(tmp_path))
    assert p.returncode == 1
    line = _one_error_line(p.stderr)
    assert str(tmp_path / "meta") in line and "not formatted" in line and "kraft storage format" in line


def test_a_bad_config_value_is_one_line_naming_the_key(tmp_path, capsys):
    cfg = write_config(tmp_path, **{"metadata.max.retention.ms": "a week"})
    code, out, err = _kraft(capsys, "server", "start", cfg)
    assert code == 1 and "metadata.max.retention.ms" in _one_error_line(err)


@pytest.mark.parametrize("item", ["node.id", "=5"])
def test_a_bad_override_is_one_line_not_a_traceback(tmp_path, capsys, item):
    """Before: ValueError("dictionary update sequence element #0 has length 1; 2 is required")."""
    code, out, err = _kraft(capsys, "server", "start", write_config(tmp_path), "--override", item)
    assert code == 1 and _one_error_line(err) == f"error: --override: expected KEY=VALUE, got {item!r}"


def test_an_unknown_log_level_is_a_usage_error_not_a_silent_fallback(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        main(["server", "start", write_config(tmp_path), "--log-level", "LOUD"])
    assert info.value.code == 2
    assert "unknown log level 'LOUD'" in capsys.readouterr().err


def test_verbose_adds_the_traceback(tmp_path, capsys):
    cfg = write_config(tmp_path, **{"node.id": "one"})
    code, out, err = _kraft(capsys, "server", "start", cfg, "--verbose")
    assert code == 1 and "Traceback" in err and err.strip().splitlines()[-1].startswith("error: node.id")


@pytest.mark.parametrize("command", ["format", "start"])
def test_permission_denied_is_one_line_naming_the_path(tmp_path, command):
    """root ignores file modes, so the process runs without CAP_DAC_OVERRIDE (setpriv) against a
    read-only directory it owns."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to drop CAP_DAC_OVERRIDE")
    locked = tmp_path / "locked"
    locked.mkdir()
    cfg = write_config(tmp_path, log_dirs=("locked/data",), metadata_dir=None)
    if command == "start":
        assert run_kraft("storage", "format", "-t", CLUSTER, "-c", cfg).returncode == 0
    os.chmod(locked / "data" if command == "start" else locked, 0o555)
    if command == "start":
        os.chmod(locked / "data" / "meta.properties", 0o000)
    args = ["storage", "format", "-t", CLUSTER, "-c", cfg] if command == "format" else ["server", "start", cfg]
    p = subprocess.run(["setpriv", "--bounding-set=-dac_override,-dac_read_search",
                        "--inh-caps=-dac_override,-dac_read_search", "--", sys.executable, "-m", "kraft", *args],
                       capture_output=True, text=True, timeout=60, env=kraft_env())
    assert p.returncode == 1, p.stderr
    assert "Traceback" not in p.stderr
    errors = [line for line in p.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and "Permission denied" in errors[0] and str(locked / "data") in errors[0], p.stderr


# --- roles and the listeners they need --------------------------------------------------------------


@pytest.mark.parametrize("command", ["start", "format"])
def test_broker_roles_without_a_client_listener_are_refused_by_start_and_format(tmp_path, capsys, command):
    """A broker needs a listener besides the controller's; format refuses what start would."""
    cfg = write_config(tmp_path, **{"process.roles": "broker,controller"})
    args = ["server", "start", cfg] if command == "start" else ["storage", "format", "-t", CLUSTER, "-c", cfg]
    code, out, err = _kraft(capsys, *args)
    assert code == 1 and "listeners" in _one_error_line(err) and "broker" in err
    assert not (tmp_path / "meta").exists()  # nothing formatted


def test_combined_broker_controller_config_is_formatted(tmp_path, capsys):
    cfg = write_config(tmp_path, **{"process.roles": "broker,controller",
                                    "listeners": "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093"})
    code, out, err = _kraft(capsys, "storage", "format", "-t", CLUSTER, "-c", cfg)
    assert code == 0, err
    assert (tmp_path / "meta" / "meta.properties").exists() and (tmp_path / "d1" / "meta.properties").exists()


def test_format_refuses_a_config_that_start_refuses(tmp_path, capsys):
    cfg = write_config(tmp_path, **{"controller.quorum.voters": "", "controller.quorum.bootstrap.servers":
                                    "127.0.0.1:19093"})
    code, _, err = _kraft(capsys, "storage", "format", "-t", CLUSTER, "-c", cfg)
    assert code == 1 and "controller.quorum.voters" in _one_error_line(err)
    assert not (tmp_path / "meta").exists()


# --- format: what it writes, and says ---------------------------------------------------------------


def test_format_writes_bootstrap_checkpoint_and_prints_the_metadata_version(tmp_path, capsys):
    cfg = write_config(tmp_path)
    code, out, err = _kraft(capsys, "storage", "format", "-t", CLUSTER, "-c", cfg)
    assert code == 0, err
    assert f"Formatting metadata directory {tmp_path / 'meta'} with metadata.version 3.9-IV0" in out
    assert f"Formatting data directory {tmp_path / 'd1'} with metadata.version 3.9-IV0" in out
    assert read_bootstrap_checkpoint(str(tmp_path / "meta")) == {"metadata.version": 21}
    assert not (tmp_path / "d1" / BOOTSTRAP_FILE).exists()  # only the metadata log directory has it


def test_bootstrap_checkpoint_bytes_are_kafkas_feature_level_record(tmp_path, capsys):
    """The record value Kafka's MetadataRecordSerde writes for FeatureLevelRecord v0."""
    from kraft import records

    _kraft(capsys, "storage", "format", "-t", CLUSTER, "-c", write_config(tmp_path), "--release-version", "3.7")
    data = (tmp_path / "meta" / BOOTSTRAP_FILE).read_bytes()
    batches = list(records.iter_batches(data))
    assert [b.is_control for b in batches] == [True, False, True]  # header, records, footer
    assert [b.base_offset for b in batches] == [0, 1, 2]
    (value,) = [bytes(r.value) for r in batches[1]]
    assert value == bytes([1, 12, 0, 17]) + b"metadata.version" + (19).to_bytes(2, "big") + bytes([0])


@pytest.mark.parametrize("flags,level", [(["--release-version", "3.7-IV2"], 17), (["-r", "21"], 21),
                                         (["--feature", "metadata.version=20"], 20)])
def test_release_version_and_feature_choose_the_level(tmp_path, capsys, flags, level):
    code, out, err = _kraft(capsys, "storage", "format", "-t", CLUSTER, "-c", write_config(tmp_path), *flags)
    assert code == 0, err
    assert read_bootstrap_checkpoint(str(tmp_path / "meta"))["metadata.version"] == level


def test_other_features_are_written_too(tmp_path, capsys):
    code, _, err = _kraft(capsys, "storage", "format", "-t", CLUSTER, "-c", write_config(tmp_path),
                          "--feature", "kraft.version=1")
    assert code == 0, err
    assert read_bootstrap_checkpoint(str(tmp_path / "meta")) == {"metadata.version": 21, "kraft.version": 1}


@pytest.mark.parametrize("flags,needle", [(["--release-version", "2.8"], "--release-version"),
                                          (["--feature", "kraft.version"], "--feature"),
                                          (["-r", "3.9", "--feature", "metadata.version=21"], "exclusive")])
def test_bad_release_or_feature_is_one_line(tmp_path, capsys, flags, needle):
    code, _, err = _kraft(capsys, "storage", "format", "-t", CLUSTER, "-c", write_config(tmp_path), *flags)
    assert code == 1 and needle in _one_error_line(err)
    assert not (tmp_path / "meta" / "meta.properties").exists()


# --- storage info ---------------------------------------------------------------------------------


def test_storage_info_shows_the_formatted_identity_and_features(tmp_path, capsys):
    cfg = write_config(tmp_path)
    _kraft(capsys, "storage", "format", "-t", CLUSTER, "-c", cfg)
    code, out, err = _kraft(capsys, "storage", "info", "-c", cfg)
    assert code == 0, out + err
    assert f"  {tmp_path / 'meta'}" in out and f"  {tmp_path / 'd1'}" in out
    # one line per directory, each with its directory.id (issue 37: info used to hide it)
    from kraft.log.state_files import MetaProperties
    for d in ("meta", "d1"):
        dir_id = MetaProperties.read(str(tmp_path / d / "meta.properties")).directory_id
        assert dir_id and f"Found metadata: {{cluster.id={CLUSTER}, directory.id={dir_id}, node.id=1, version=1}}" in out
    assert "metadata.version=21" in out and "3.9-IV0" in out


def test_storage_info_lists_problems_and_exits_1(tmp_path, capsys):
    cfg = write_config(tmp_path)
    code, out, err = _kraft(capsys, "storage", "info", "-c", cfg)
    assert code == 1 and "Found problems:" in out
    assert f"{tmp_path / 'meta'} does not exist" in out and f"{tmp_path / 'd1'} does not exist" in out


# --- logs and help ------------------------------------------------------------------------------


def test_json_log_format_is_one_object_per_line(tmp_path):
    p = run_kraft("server", "start", write_config(tmp_path), "--log-format", "json")
    assert p.returncode == 1
    lines = p.stderr.strip().splitlines()
    assert lines
    for line in lines:
        obj = json.loads(line)
        assert {"ts", "level", "logger", "msg"} <= set(obj) and obj["ts"].endswith("Z")
    assert any(o["level"] == "ERROR" and "kraft storage format" in o["msg"] for o in map(json.loads, lines))


def _all_parsers(parser, path=("kraft",)):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _all_parsers(sub, path + (name,))


def test_every_option_of_every_command_is_explained_with_its_default():
    """--help for every command explains each option, and shows the default where there is one."""
    missing = []
    for path, parser in _all_parsers(build_parser()):
        help_text = parser.format_help()
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)):
                continue
            name = " ".join(path) + " " + (action.option_strings or [action.dest])[0]
            if not action.help:
                missing.append(f"{name}: no help")
            elif action.default not in (None, False, argparse.SUPPRESS) and action.option_strings:
                if f"(default: {action.default})" not in " ".join(help_text.split()):
                    missing.append(f"{name}: default {action.default!r} not shown")
    assert not missing, missing
