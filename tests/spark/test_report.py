"""The pipeline's HTML report as a reader sees it (issue 37 item 5), without Spark: times as UTC
times, ratios and shares rounded, bars narrow enough to tell events a second apart, integer axes
for counts, a legend entry for every series however many, and the voter change between epochs."""

from __future__ import annotations

import re

import pytest

from kraft.spark.report import Plot, Report, Table, bar_width_ms, cell, integer_valued

T0 = 1_764_340_000_000  # 2025-11-28


def test_cells_show_times_durations_ratios_shares_and_lists_readably():
    assert cell("first_ms", T0 + 123) == "2025-11-28 14:26:40.123 UTC"
    assert cell("election_gap_ms", 1505) == "1505"  # a duration, not a time
    assert cell("ratio", 2.345678) == "2.35" and cell("ratio", 0.123456) == "0.123"
    assert cell("ratio", 123456.7) == "123,457"
    assert cell("top_key_share", 0.5) == "50.0%"
    assert cell("codecs", ["gzip", "lz4"]) == "gzip, lz4"
    assert cell("at_or_below_hw", True) == "yes" and cell("x", None) == ""


def test_bars_are_narrower_than_the_gap_between_events():
    three = {"fenced": [(T0, 1), (T0 + 1000, 1)], "unfenced": [(T0 + 40_000, 1)]}
    w = bar_width_ms(three)
    assert w <= 800 and w <= 40_000 / 100  # the old width, 0.0005 days, was 43 s: one smear
    assert bar_width_ms({"one": [(T0, 1)]}) == 1000.0
    assert bar_width_ms({"a": [(T0, 1), (T0 + 3_600_000, 1)]}) == 36_000  # 1% of an hour's span


def test_counts_get_an_integer_axis_and_means_do_not():
    assert integer_valued({"changes": [(T0, 1), (T0 + 1, 3)]})
    assert not integer_valued({"mean": [(T0, 2.5)]})
    assert not integer_valued({})


def test_a_report_with_many_series_keeps_a_legend_and_formats_its_tables():
    pytest.importorskip("matplotlib", reason="matplotlib draws the plots (the spark extra)")
    series = {f"topic-{i}": [(T0 + j * 60_000, j + i) for j in range(3)] for i in range(20)}
    html = Report("r", ["s"], [Plot("Records per topic", series, "records"),
                               Table("T", ["first_ms", "ratio"], [(T0, 1.23456)])]).html()
    assert html.count("<img") == 1
    cells = re.findall(r"<td>([^<]*)</td>", html)
    assert cells == ["2025-11-28 14:26:40.000 UTC", "1.23"]


def test_the_quorum_table_shows_the_voter_change_between_epochs():
    jobs = pytest.importorskip("kraft.spark.jobs")
    assert jobs._voter_ids("[3, 1, 2]") == (1, 2, 3)
    assert jobs._voter_ids('[{"voter_id": 2}, {"voter_id": 1}]') == (1, 2)
    assert jobs._voter_ids("not json") == ()
