"""Tests of `proxy/shell` and the whole server, in the shell's rooms: `web`, `upstream`, `store`,
`runtime`, `driver` (the settings' loading, `config_load`, at this folder's root)."""
