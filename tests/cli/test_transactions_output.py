"""The pure parts of ``kraft transactions``: Kafka's table layout (cells padded to the widest,
each followed by a tab) and FindHangingTransactions' rule (an open transaction hangs unless its
coordinator still lists that partition in the transaction)."""

from __future__ import annotations

from types import SimpleNamespace as NS

from kraft.cli.transactions import hanging, hanging_rows, producer_rows, table_lines


def test_table_columns_are_as_wide_as_their_widest_cell_and_end_with_a_tab():
    assert table_lines(["A", "Bee"], [["long-value", "1"], ["x", "22"]]) == [
        "A         \tBee\t", "long-value\t1  \t", "x         \t22 \t"]
    assert table_lines(["A", "Bee"], []) == ["A\tBee\t"]


def _producer(pid, start, coordinator_epoch=-1, last_timestamp=0):
    return NS(producer_id=pid, producer_epoch=0, last_sequence=2, last_timestamp=last_timestamp,
              coordinator_epoch=coordinator_epoch, current_txn_start_offset=start)


def test_absent_values_print_as_kafka_prints_them():
    assert producer_rows([_producer(7, -1), _producer(8, 42, coordinator_epoch=3)]) == [
        ["7", "0", "-1", "2", "0", "None"], ["8", "0", "3", "2", "0", "42"]]


def test_an_open_transaction_hangs_unless_its_coordinator_lists_the_partition():
    tp0, tp1 = ("t", 0), ("t", 1)
    unknown, known, moved, gone = _producer(1, 5), _producer(2, 6), _producer(3, 7), _producer(4, 8)
    described = {"app-2": NS(topics=[NS(topic="t", partitions=[0])]),   # still in app-2's transaction
                 "app-3": NS(topics=[NS(topic="t", partitions=[1])]),   # coordinator has moved on
                 "app-4": None}                                          # TRANSACTIONAL_ID_NOT_FOUND
    listed = {2: "app-2", 3: "app-3", 4: "app-4"}                       # producer 1: no coordinator knows it
    found = hanging([(tp0, unknown), (tp0, known), (tp0, moved), (tp0, gone)], listed, described)
    assert [p.producer_id for _, p in found] == [1, 3, 4]
    assert hanging([(tp1, moved)], listed, described) == []


def test_hanging_rows_give_whole_minutes_since_the_last_write():
    [row] = hanging_rows([(("t", 3), _producer(9, 100, last_timestamp=1_000))], now=1_000 + 125_000)
    assert row == ["t", "3", "9", "0", "-1", "100", "1000", "2"]
