/**
 * A plugin that misbehaves on purpose, to check how the host contains a TypeScript plugin:
 * console output, an uncaught exception, a rejected promise, a loop, a memory bomb. Served by
 * `tests/e2e/plugins_ts.rs`; each chart should fail only its own request.
 */

import { ChartResult, type DataSource, exportPlugin } from "canopy-sdk";

function customize(ds: DataSource): void {
  const customers = ds.collection("customers");

  customers.addField("noisy", {
    columnType: "Number",
    dependencies: ["id"],
    getValues: (rows) => {
      console.log(`noisy: ${rows.length} rows`); // to the host's log (info)
      console.warn("a warning from the plugin"); // the host's log (warn)
      console.error({ written: "to console.error" });
      return rows.numbers("id").map((n) => (n === null ? null : n * 2));
    },
  });

  customers.addChart("boom", () => {
    const missing = (globalThis as unknown as Record<string, { figure: number }>).missing;
    return ChartResult.value(missing.figure); // an uncaught TypeError: a 500
  });

  customers.addChart("rejected", async () => {
    await Promise.resolve();
    throw new RangeError("rejected after an await");
  });

  customers.addChart("loop", () => {
    let n = 0;
    for (;;) n += 1; // the host's time limit stops it
  });

  customers.addChart("bomb", () => {
    const hoard: Uint8Array[] = [];
    for (;;) hoard.push(new Uint8Array(1 << 20).fill(1)); // the memory limit stops it
  });

  customers.addChart("fine", () => ChartResult.value(42));
}

export const { customizer, workflow } = exportPlugin(customize);
