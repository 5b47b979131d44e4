"""``python3 -m dcblab.build kernel|patch|checkpatch|check-series``."""

import sys

from .main import main

__all__ = []

sys.exit(main())
