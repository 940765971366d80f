"""Codec tests run against both implementations through the ``codec`` fixture."""

import os

import pytest

import kraft.records

NO_EXTENSIONS = bool(os.environ.get("KRAFT_NO_EXTENSIONS"))
IMPLEMENTATIONS = ["native", "python"]


@pytest.fixture(params=IMPLEMENTATIONS)
def codec(request):
    """The codec namespace (build_batch, RecordBatch, ...) of one implementation."""
    if request.param == "native" and NO_EXTENSIONS:
        pytest.skip("KRAFT_NO_EXTENSIONS is set: only the pure-Python codec is under test")
    return kraft.records.implementation(request.param)


@pytest.fixture
def native():
    if NO_EXTENSIONS:
        pytest.skip("KRAFT_NO_EXTENSIONS is set")
    return kraft.records.implementation("native")


@pytest.fixture
def pure():
    return kraft.records.implementation("python")
