"""Golden suites and their cases: the files a suite author writes, read and checked.

`dataset` is the public face (loading, discovery, the JSON Schemas); `suite_models`,
`case_models` and `expectations` are the pydantic models of suite.yaml, case files and their
`expect:` entries; `suite_files` and `case_files` read and discover them; `suite_schema`
makes the editors' JSON Schemas; `validation` rewrites pydantic's errors as sentences naming
the file, line and field.
"""
