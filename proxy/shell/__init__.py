"""The HTTP shell: all the proxy's I/O, in rooms by job, bottom first: `runtime` (work
beside a request, the client's socket), `upstream` (the model servers: client, replicas, the
choice of one), `store` (kept answers: the interface, one module per backend),
`recorder` (the status page's records, in bounded rings), `config_load` (the settings read and
checked), `driver` (a request's trip upstream: the turn, the passthrough), `web` (the HTTP
app: its objects, views, handlers and endpoints), `server` (the process that runs it:
gunicorn or Werkzeug, readiness, the health check). It decides nothing a test of the core
could not."""
