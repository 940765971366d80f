"""docs/configs.md is what tools/gen_config_docs.py makes of the config definitions (as Kafka's
configuration reference is generated from its ConfigDefs), and every definition states its fate."""

from __future__ import annotations

import importlib.util
import os

from kraft.metadata.broker_config_defs import BROKER_CONFIGS
from kraft.metadata.config_defs import TOPIC_CONFIGS, Mode, Status

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _generator():
    spec = importlib.util.spec_from_file_location("gen_config_docs", os.path.join(ROOT, "tools", "gen_config_docs.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_table_is_the_generators_output():
    with open(os.path.join(ROOT, "docs", "configs.md"), encoding="utf-8") as f:
        committed = f.read()
    assert committed == _generator().render(), "docs/configs.md is stale: run python tools/gen_config_docs.py"


def test_every_config_states_its_fate_and_why():
    statuses = {Status.APPLIED, Status.ACCEPTED, Status.LIMITED, Status.REFUSED}
    for d in TOPIC_CONFIGS.values():
        assert d.status in statuses and d.note and d.mode is None, d.name
        assert (d.status == Status.LIMITED) == (d.refuse is not None), d.name
    for d in BROKER_CONFIGS.values():
        assert d.mode in (Mode.READ_ONLY, Mode.PER_BROKER, Mode.CLUSTER_WIDE) and d.note, d.name
        assert (d.status == Status.READ_ONLY) == (d.mode == Mode.READ_ONLY), d.name
