"""The base of the layer's errors (docs/architecture.md, "Errors").

Every exception the layer raises on purpose derives from `JobstreamError`: a request refusal
(`protocol.errors.ProtocolError`, answered by the HTTP shell with the status of its kind), a
source failure (`SourceError`, ending a job with its `Reason`), configuration that must stop
start-up, and the signals its loops pass between themselves. Anything else is a bug.
"""

from __future__ import annotations


class JobstreamError(Exception):
    """An error the layer raises on purpose; its message says what happened."""
