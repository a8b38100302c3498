"""The HTTP app: the Flask app and its views, the door (keys, CORS, body), the app's objects
and the handlers of what comes in, the proxy's own endpoints. The server process that runs
it is `proxy.shell.server`; the status page's records are kept by `proxy.shell.recorder`."""
