"""The operator CLI (dev/ops code, outside the layer): `python -m jobstream_cli --help`."""
