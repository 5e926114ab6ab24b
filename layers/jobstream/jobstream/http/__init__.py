"""HTTP plumbing for API Gateway HTTP API (payload 2.0) handlers."""
