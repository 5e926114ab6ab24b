"""Build steps run by the Makefile (not shipped, not part of the local stack)."""
