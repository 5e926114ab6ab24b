"""Business operations: admission, reads, the event stream, cancellation."""
