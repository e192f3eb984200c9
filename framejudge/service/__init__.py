"""The HTTP API in front of the same library calls."""
