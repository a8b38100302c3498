"""What runs beside a request in a worker: work off the gevent hub, timers, and the
client's socket (is it gone, cut it)."""
