"""`agentbench schema`: write the JSON Schemas of suite.yaml and case files, for editors.

`--plugin` imports modules first, so the scorers they define with `@scorer` are completed and
checked by the editor like built-in ones (the shipped schemas know only the built-ins).
"""

from __future__ import annotations

from pathlib import Path

import click
import orjson

from agentbench.errors import UsageError
from agentbench.evals.suites.dataset import case_json_schema, suite_json_schema
from agentbench.loading import import_module

EPILOG = """\b
Examples:
  agentbench schema
  agentbench schema --out golden/schema --plugin checks.scorers
"""


@click.command("schema", epilog=EPILOG)
@click.option(
    "--out",
    "out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("schema"),
    show_default=True,
    help="Folder to write suite.schema.json and case.schema.json into.",
)
@click.option(
    "--plugin",
    "plugins",
    multiple=True,
    metavar="MODULE|FILE.py",
    help="Import this module (from the current folder) or file first, so the scorers it "
    "defines with @scorer are in the schemas; repeatable.",
)
def schema(out: Path, plugins: tuple[str, ...]) -> None:
    """Write suite.schema.json and case.schema.json (scorer names and parameters included).

    Reference them from a suite file with a first line such as:

    \b
        # yaml-language-server: $schema=../../schema/suite.schema.json
    """
    for plugin in plugins:
        try:
            import_module(plugin, search_path=Path.cwd())
        except (Exception, SystemExit) as exc:
            raise UsageError(
                f"--plugin {plugin!r}: importing it raised {type(exc).__name__}: {exc}"
            ) from None
    for name, document in (
        ("suite.schema.json", suite_json_schema()),
        ("case.schema.json", case_json_schema()),
    ):
        target = out / name
        try:
            out.mkdir(parents=True, exist_ok=True)
            target.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n")
        except OSError as exc:
            raise UsageError(
                f"--out {out}: cannot write {name} there ({exc.strerror or exc}); name a folder"
            ) from None
        click.echo(f"wrote {target}")
