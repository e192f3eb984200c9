"""Bundled example clips and the PyAV writer that makes them."""
