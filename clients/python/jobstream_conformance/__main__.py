import sys

from jobstream_conformance.cli import main

sys.exit(main())
