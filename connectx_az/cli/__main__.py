"""``python -m connectx_az.cli``: the same as the ``connectx-az`` command."""

import sys

from connectx_az.cli.main import main

sys.exit(main())
