"""`agentbench schema`: write the JSON Schemas of suite.yaml and case files, for editors."""

from __future__ import annotations

from pathlib import Path

import click
import orjson

from agentbench.evals.dataset import case_json_schema, suite_json_schema


@click.command("schema")
@click.option(
    "--out",
    "out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("schema"),
    show_default=True,
    help="Folder to write suite.schema.json and case.schema.json into.",
)
def schema(out: Path) -> None:
    """Write suite.schema.json and case.schema.json (scorer names and parameters included).

    Reference them from a suite file with a first line such as
    `# yaml-language-server: $schema=../../schema/suite.schema.json`.
    """
    out.mkdir(parents=True, exist_ok=True)
    for name, document in (
        ("suite.schema.json", suite_json_schema()),
        ("case.schema.json", case_json_schema()),
    ):
        target = out / name
        target.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n")
        click.echo(f"wrote {target}")
