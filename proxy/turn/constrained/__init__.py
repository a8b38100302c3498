"""Guaranteed calls: what an upstream is (`profile`), which request field carries which
constraint on which server and the re-ask's body (`dialects`), and when a demanded or
botched call is asked once more (`policy`, a state machine over the core's decisions)."""
