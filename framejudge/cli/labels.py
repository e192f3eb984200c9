"""framejudge labels: human labels from labelling tools."""
