"""The parts of ``kraft consumer-groups`` that need no cluster: Kafka's date-time and ISO-8601
duration forms, the clamping of reset offsets to the log's ends, and reset plans read back
from the CSV that --export writes."""

from __future__ import annotations

import datetime

import pytest

from kraft.cli.consumer_group_offsets import clamp, parse_datetime_ms, parse_duration_ms, read_plan
from kraft.cli.kafka_tool_args import ToolError


@pytest.mark.parametrize("text,ms", [("PT15M", 900_000), ("P1D", 86_400_000), ("P1DT2H", 93_600_000),
                                     ("PT0.5S", 500), ("pt1h30m", 5_400_000), ("-PT1M", -60_000)])
def test_iso_durations(text, ms):
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["", "P", "PT", "15M", "P1DT", "one day", "P1W"])
def test_bad_durations_are_refused(text):
    with pytest.raises(ToolError, match="ISO-8601"):
        parse_duration_ms(text)


def test_datetimes_with_and_without_a_zone():
    assert parse_datetime_ms("2026-01-01T00:00:00.000Z") == 1_767_225_600_000
    assert parse_datetime_ms("2026-01-01T01:00:00+01:00") == 1_767_225_600_000
    local = datetime.datetime(2026, 1, 1, 12, 30).astimezone()
    assert parse_datetime_ms("2026-01-01T12:30:00.000") == int(local.timestamp() * 1000)
    with pytest.raises(ToolError, match="YYYY-MM-DD"):
        parse_datetime_ms("yesterday")


def test_offsets_outside_the_log_move_to_the_nearer_end(capsys):
    got = clamp({("t", 0): 50, ("t", 1): 1, ("t", 2): 7, ("t", 3): 9},
                starts={("t", 0): 0, ("t", 1): 5, ("t", 2): 5}, ends={("t", 0): 10, ("t", 1): 10, ("t", 2): 10})
    assert got == {("t", 0): 10, ("t", 1): 5, ("t", 2): 7, ("t", 3): 9}  # unknown ends: left as asked
    err = capsys.readouterr().err
    assert "New offset (50) is higher than latest offset for topic partition t-0. Value will be set to 10" in err
    assert "New offset (1) is lower than earliest offset for topic partition t-1. Value will be set to 5" in err


def test_reset_plans_with_and_without_the_group_column(tmp_path):
    one = tmp_path / "one.csv"
    one.write_text("t,0,3\nt,1,4\n\n")
    assert read_plan(str(one), ["g"]) == {"g": {("t", 0): 3, ("t", 1): 4}}
    many = tmp_path / "many.csv"
    many.write_text("g1,t,0,3\ng2,u,1,4\n")
    assert read_plan(str(many), ["g1", "g2"]) == {"g1": {("t", 0): 3}, "g2": {("u", 1): 4}}
    bad = tmp_path / "bad.csv"
    bad.write_text("t,zero,3\n")
    with pytest.raises(ToolError, match="bad.csv:1"):
        read_plan(str(bad), ["g"])
