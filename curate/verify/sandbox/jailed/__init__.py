"""Code that runs INSIDE the sandbox: the program's harness (`program`), the test process (`testrunner`;
its channel to the program `channel`, the references it holds `remote`, what program names it binds
`names`, pytest files `pytestrun`, comparison guards `guards`) and the typed plain-data encoding they
speak (`codec`, messages `wire`).

Standard library only, and only relative imports between these modules: the host stages this folder
read-only into every run as `/sbx/jailed`, where the `cotforge` package does not exist. The host imports
`codec` too (its tests check the encoding), never `program` or `testrunner`.
"""
