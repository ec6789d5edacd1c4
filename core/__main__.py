"""``python -m tracekit``: the same as the ``tracekit`` command."""

import sys

from tracekit.cli import main

sys.exit(main())
