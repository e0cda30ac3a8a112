"""A tiny retrieval-augmented app under test: the Acme Cloud Storage help centre."""
