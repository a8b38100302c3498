"""The server process: `serve` (gunicorn with gevent workers, the settings
`deploy/gunicorn.conf.py` shares, or Werkzeug with `--dev`; the health check), `readiness`
(the port opened by the first worker ready, and systemd told), `head_wait` (how long a worker
waits for a request head, and for the next request), `request` (a head's plain header lines
read in one pass), `settled` (a worker's gunicorn settings, read once). It runs the app of
`web`, above which it stands."""
