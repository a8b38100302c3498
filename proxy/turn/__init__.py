"""The turn core: one chat completion turn, from the plan to the turn's typed result or
error, as functions from data to data. `plan` (request → plan), `compat` (rewrites for the
upstream), `normalize` (upstream completion → the typed `result`, calls extracted), `core`
(the decisions: policies, errors, retry), `waiting` (the wait as a state machine); for the
streamed mode `live` (a turn fed upstream's events), `assemble` (stream chunks → the completion
they add up to), `holdback` (what of the text may flow before the end, held at the openers the
formats' specs declare)."""
