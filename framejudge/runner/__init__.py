"""Execution policy: how many model calls at once per endpoint, at what rate, which items are in
flight, and (for the service) which worker grades which queued item. The judge and the pipeline
know none of it."""

from ..endpoint import Endpoint, EndpointState
from .local import RunProgress, run_batch

__all__ = ["Endpoint", "EndpointState", "RunProgress", "run_batch"]
