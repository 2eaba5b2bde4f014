"""``python -m asyos.convert INPUT OUTPUT``: row-major data to the feature-major layout."""

import sys

from .cli.convert import main

if __name__ == "__main__":
    sys.exit(main())
