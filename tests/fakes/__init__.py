"""Fakes of the inference servers the proxy sits beside (vLLM, llama.cpp, SGLang), each on
loopback with the real server's fields, refusals and shapes, and the model behaviours they
run (tests/fakes/models.py)."""
