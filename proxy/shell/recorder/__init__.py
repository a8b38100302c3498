"""The status recorder, a store of its own: `rings` keeps what `/proxy/status` shows in
bounded rings, in memory or in a ring file per gunicorn worker, which the status page reads
all of."""
