"""The review queue: an annotation lead's page for looking at each judge-vs-human disagreement with
the video in front of them, deciding, and seeing the agreement figures move."""
