// The HTML report's durations (tfplace_widget/_static/format.js) on the cases that
// summary.format_us is tested on too (tests/format_cases.json, see tests/export/test_html_report.py).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { loadScript } from "./load_static.mjs";

const table = JSON.parse(readFileSync(new URL("../format_cases.json", import.meta.url), "utf8"));
const { formatUs } = loadScript("format.js", ["formatUs"]);

for (const c of table.cases) {
  test(`formatUs(${c.us})`, () => assert.equal(formatUs(c.us), c.text));
}

test("a missing duration (NaN) shows as nothing", () => assert.equal(formatUs(NaN), ""));
