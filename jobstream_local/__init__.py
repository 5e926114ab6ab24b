"""The local stack: jobstream on one machine, no AWS account and no Docker (dev-only code)."""
