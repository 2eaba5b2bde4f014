"""``python -m asyos.server``: the Asy-OS server over ZeroMQ (see ``asyos server -h``)."""

import sys

from .cli.cluster import main_server

if __name__ == "__main__":
    sys.exit(main_server())
