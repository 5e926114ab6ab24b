"""jobstream: a Workflow Protocol v1 job producer on AWS serverless."""

from jobstream import collector, recorded_code

# First, before any other import of a function: collector.py and recorded_code.py say why.
collector.pause_for_import()
recorded_code.install()
