"""One local SparkSession for the whole run (``local[2]``: a JVM start is ~10 s, so one per
module cost a minute of CI); no test changes its conf. The log builders are in
``spark_builders``."""

from __future__ import annotations

import logging
import shutil

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'kraft[spark]')")
pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install 'kraft[spark]')")


@pytest.fixture(scope="session")
def spark():
    if shutil.which("java") is None:
        pytest.skip("Spark needs Java (no `java` on PATH)")
    import kraft.spark

    session = kraft.spark.local_session("local[2]", "kraft-tests")
    yield session
    session.stop()
    # py4j logs "Closing down clientserver connection" from a __del__ at interpreter exit, after
    # pytest closed the streams: a "--- Logging error ---" traceback at the end of every run.
    logging.getLogger("py4j").setLevel(logging.WARNING)
