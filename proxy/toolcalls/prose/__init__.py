"""What stays the model's prose: the answer without the markup its format frames it
with (`answer`, built from `markup`), and the markup a taken call leaves behind (`cleanup`)."""
