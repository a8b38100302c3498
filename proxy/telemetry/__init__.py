"""What the proxy tells: the one log line per request, the Prometheus metrics, the status
document and its page. Pure: the shell records and serves them."""
