"""What an upstream that failed still said: the model's text an error holds, read so that the
turn goes on as if the upstream had answered with it (`upstream_error`)."""
