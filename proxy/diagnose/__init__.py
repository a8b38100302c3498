"""The operator's tools, outside the shell: `doctor` (probe a live upstream, recommend
settings) and `replay` (run a captured exchange through the same turn and fronts)."""
