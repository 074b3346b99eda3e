"""Retrieval as a service: a FastAPI app over an index directory, and the client that searches it.

``grasp.serve.app`` (FastAPI, the ``serve`` extra) holds the service and
``grasp.serve.batcher`` its cross-request micro-batching; ``grasp.serve.client`` (only
``requests``) holds ``RemoteIndex`` and ``open_index``, which the scripts use to search either
in-process or remotely by configuration alone (``index.remote_url``).
"""

from grasp.serve.agreement import hits_difference
from grasp.serve.client import (
    RemoteIndex,
    RemoteParagraph,
    RetrievalServiceError,
    ServiceIndexChangedError,
    ServiceRequestError,
    ServiceUnavailableError,
    open_index,
)
from grasp.serve.config import PROTOCOL_VERSION, ServiceConfig

__all__ = [
    "PROTOCOL_VERSION",
    "RemoteIndex",
    "RemoteParagraph",
    "RetrievalServiceError",
    "ServiceConfig",
    "ServiceIndexChangedError",
    "ServiceRequestError",
    "ServiceUnavailableError",
    "hits_difference",
    "open_index",
]
