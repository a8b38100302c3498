"""The model servers: the HTTP client, the replicas' health and load, and which replica a
request goes to (`choice`, pure)."""
