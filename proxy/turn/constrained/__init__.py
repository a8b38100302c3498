"""Guaranteed calls: what an upstream is (`profile`), which request field carries which
constraint on which server and the re-ask's body (`dialects`), and when a demanded call
or an unreadable frame is asked once more (`policy`, a state machine over the core's decisions)."""
