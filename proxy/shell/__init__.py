"""The HTTP shell: all the proxy's I/O, in rooms by job, bottom first: `runtime` (work
beside a request, the client's socket), `upstream` (the model servers: client, replicas, the
choice of one), `store` (kept answers: the interface, one module per backend),
`config_load` (the settings read and checked), `driver` (a request's trip upstream: the turn,
the passthrough), `web` (the HTTP app, its views and endpoints, the server). It decides
nothing a test of the core could not."""
