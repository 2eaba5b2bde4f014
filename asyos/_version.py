"""Package version and wire-protocol version: independent numbers (a protocol change is not a release)."""

__version__ = "0.1.0"
# the version of the wire format (transport/wire.py) every message carries; 3: credit
# in VIEW, one codec for MPI; 4: HELLO carries the data's p; 5: CONFIG carries the
# substitution rule and its ridge; 6: HELLO carries the data's fingerprint; 7: PUSH
# carries the kept features' importance; 8: INTRODUCE asks an unknown socket for a HELLO;
# 9: CONFIG carries the worker's plan, its integers as int64; 10: FINAL carries the kept
# columns; 11: FINAL's seconds add the time blocked for a view or credit; 12: shards
# are pieces of adjacent features (core/shards.py), not every q-th feature at every p;
# 13: FAIL, a worker's word that its data cannot be stepped on; 14: BUNDLE and NODEVIEW,
# a node leader's summed pushes and the views for its node
PROTOCOL_VERSION = 14
