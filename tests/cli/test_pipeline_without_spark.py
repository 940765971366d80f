"""``kraft pipeline`` on a machine without the Spark extra: one error line naming what to install,
exit status 2, no traceback (a newcomer's first try, before ``pip install -e '.[spark]'``). Run in
a child interpreter whose ``pyspark`` import fails, whether or not this machine has pyspark."""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# A meta-path finder that refuses pyspark, as an interpreter without it would.
NO_PYSPARK = """
import sys
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name == "pyspark" or name.startswith("pyspark."):
            raise ModuleNotFoundError("No module named 'pyspark'", name=name)
sys.meta_path.insert(0, Refuse())
from kraft.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_pipeline_without_pyspark_says_what_to_install_in_one_line(tmp_path):
    p = subprocess.run([sys.executable, "-c", NO_PYSPARK, "pipeline", "audit", str(tmp_path / "node-*"),
                        "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=60,
                       cwd=str(tmp_path), env=dict(os.environ, PYTHONPATH=ROOT))
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().splitlines() == [
        "error: kraft pipeline needs pyspark (and Java 17+): pip install 'kraft[spark]' "
        "(from a checkout: pip install -e '.[spark]')"]
    assert "Traceback" not in p.stderr and p.stdout == ""
    assert not (tmp_path / "out").exists()
