"""The bottom floor: primitives every room uses and that know nothing above them: the
settings' value (`config`), the proxy's errors, SSE, ids, JSON depth and bulk decoding."""
