"""The turn as one sans-I/O machine: `events` (what it is told, what it asks, the upstream's
outcome), `asks` (each call's body and the re-ask policy stepped over each decision), `turn`
(the machine and its table, which hold the wait, the policy and the live turn together)."""
