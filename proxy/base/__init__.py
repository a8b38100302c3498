"""The bottom floor: primitives every room uses and that know nothing above them: the
settings' value (`config`), the proxy's errors, SSE, ids, JSON depth, bulk decoding, and a
frozen value changed by copy (`frozen`)."""
