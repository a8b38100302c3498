"""How formats build their frames, one module per grammar: `steps` (what every grammar shares:
the loop over a format's opening markers, where an unclosed frame reaches, a call's section),
`json_payload` (a marker, then JSON), `invoke` (the `<invoke name=…><parameter name=…>`
tags), `pair` (a name, then key/value tags). A format module imports the grammar it writes."""
