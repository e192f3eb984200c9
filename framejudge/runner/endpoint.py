"""The endpoint gate under its former name: it lives in `framejudge.endpoint`, below both the judges
that pass their calls through it and the runner that sizes it."""

from ..endpoint import Endpoint, EndpointBusy, EndpointState, Gate, Slot, UnlimitedGate

__all__ = ["Endpoint", "EndpointBusy", "EndpointState", "Gate", "Slot", "UnlimitedGate"]
