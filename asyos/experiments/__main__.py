"""``python -m asyos.experiments NAME``."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
