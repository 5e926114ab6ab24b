"""jobstream: a Workflow Protocol v1 job producer on AWS serverless."""
