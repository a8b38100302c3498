"""The turn core: one chat completion turn, from the plan to the turn's typed result or
error, as functions from data to data. `plan` (request → plan), `compat` (rewrites for the
upstream), `normalize` (upstream completion → the typed `result`, calls extracted), `core`
(the decisions: policies, errors, retry), `machine` (the turn as one sans-I/O machine:
events in, actions out, the shell's driver carrying them out), `waiting` (the wait as a
state machine, one of the machine's parts), `constrained` (what an upstream is, its
constraint dialects, the re-ask policy), `thinking` and `closers` (thinking written into the
content), `context_window` (a refusal for the window read), `rescue` (a parse failure's
model text read); for the streamed mode `live` (a turn fed upstream's events), `assemble`
(stream chunks → the completion they add up to), `holdback` (what of the text may flow
before the end, held at the openers the formats' specs declare)."""
