"""jobstream: a Workflow Protocol v1 job producer on AWS serverless."""

from jobstream import collector

# First, before any other import of a function: collector.py says why.
collector.pause_for_import()
