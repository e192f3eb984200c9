"""Judge-vs-human and human-vs-human agreement, with intervals."""
