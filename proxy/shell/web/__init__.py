"""The HTTP app: the Flask app and its views, the door (keys, CORS, body), the proxy's own
endpoints, and the server that runs it (gunicorn, or Werkzeug with `--dev`)."""
