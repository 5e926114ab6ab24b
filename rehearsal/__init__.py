"""Deployment rehearsal: the SAM build deployed to a local AWS emulator and driven end to end.

Dev-only (never in the layer). `make rehearse` runs it; docs/operations.md says what it proves
and which shims it applies.
"""
