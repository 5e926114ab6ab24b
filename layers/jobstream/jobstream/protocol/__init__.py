"""The protocol facade: pure (no I/O), the only place protocol words are produced."""
