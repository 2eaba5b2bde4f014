"""Package version and wire-protocol version: independent numbers (a protocol change is not a release)."""

__version__ = "0.1.0"
PROTOCOL_VERSION = 1
