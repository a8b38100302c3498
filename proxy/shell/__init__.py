"""The HTTP shell: the Flask app, the door, the upstream client, and the driver that carries
out a turn's waiting. All the proxy's I/O lives here; it decides nothing a test of the core
could not."""
