"""A plugin that misbehaves on purpose, to check how the host contains a Python plugin: output,
an uncaught exception, a loop, a memory bomb, raw writes to the WASI stderr. Built and served
by hand (see NOTES-python.md); each chart should fail only its own request."""

from __future__ import annotations

import os
import sys
import warnings
from typing import Any

from canopy_sdk import ChartContext, ChartResult, ColumnType, Context, DataSource, Rows, export_plugin


def customize(ds: DataSource) -> None:
    customers = ds.collection("customers")

    @customers.computed_field("noisy", ColumnType.NUMBER, ["id"])
    def noisy(rows: Rows, ctx: Context) -> list[Any]:
        print(f"noisy: {len(rows)} rows")  # to the host's log (info)
        warnings.warn("a warning from the plugin")  # sys.stderr: the host's log (warn)
        sys.stderr.write("written to sys.stderr\n")
        return [n * 2 if n is not None else None for n in rows.numbers("id")]

    @customers.chart("boom")
    def boom(ctx: ChartContext) -> ChartResult:
        return {}["missing"]  # type: ignore[index]  # an uncaught exception: a 500

    @customers.chart("loop")
    def loop(ctx: ChartContext) -> ChartResult:
        n = 0
        while True:  # the host's time limit stops it
            n += 1

    @customers.chart("bomb")
    def bomb(ctx: ChartContext) -> ChartResult:
        hoard = []
        while True:  # the memory limit stops it
            hoard.append(bytearray(1 << 20))

    @customers.chart("raw_stderr")
    def raw_stderr(ctx: ChartContext) -> ChartResult:
        os.write(2, b"straight to the WASI stderr\n")  # bypasses the SDK's redirection
        return ChartResult.value(1)

    @customers.chart("fine")
    def fine(ctx: ChartContext) -> ChartResult:
        return ChartResult.value(42)


Customizer, Workflow = export_plugin(customize)
