"""Outbound requests: URLs parsed once, origin patterns, the address guard, pinned HTTP."""
