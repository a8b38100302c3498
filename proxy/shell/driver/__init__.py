"""A request's trip upstream while its client waits: the turn (`turns`) and the byte-for-byte
passthrough, both stepping the wait machine (`turn.waiting`)."""
