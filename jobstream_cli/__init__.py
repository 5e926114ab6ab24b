"""The jobstream CLI (dev/ops code, outside the layer): `jobstream --help` after `make setup`."""
