"""jobstream: a Workflow Protocol v1 job producer on AWS serverless."""

from jobstream import collector, dataclass_code

# First, before any other import of a function: collector.py and dataclass_code.py say why.
collector.pause_for_import()
dataclass_code.install()
