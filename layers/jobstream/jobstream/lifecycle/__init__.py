"""The lifecycle of a job: its moves (transitions), its event log, its ids and retention."""
