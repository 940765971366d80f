"""kraft: Kafka's KRaft metadata quorum, controller and brokers, rebuilt for Python.

This top-level module only carries the version; import the layer you need
(``kraft.records``, ``kraft.log``, ``kraft.raft``, ...). It must not import any
subpackage eagerly, so that ``import kraft`` stays cheap and side-effect free.
"""

__version__ = "0.1.0"
