"""``python -m backfill_assets.cli``: the same as the ``backfill-assets`` command."""

import sys

from backfill_assets.cli.main import main

sys.exit(main())
