"""The house's structural guards: the import graph, module sizes, how tests share helpers and
where test files live."""
