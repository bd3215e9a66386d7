// The HTML report's search (tfplace_widget/_static/search.js) on the table of cases that
// search.py is tested on too (tests/search_cases.json, see tests/test_search_cases.py).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { loadScript } from "./load_static.mjs";

const table = JSON.parse(readFileSync(new URL("../search_cases.json", import.meta.url), "utf8"));
const { matchNames, SearchError } = loadScript("search.js", ["matchNames", "SearchError"]);
const names = table.names;
const lowered = names.map((name) => name.toLowerCase());

for (const c of table.cases) {
  const title = `${JSON.stringify(c.pattern)} regex=${c.regex} case=${c.case}`;
  test(title, () => {
    const search = () => matchNames(names, lowered, c.pattern, c.regex, c.case);
    if (c.error) {
      assert.throws(search, (error) => {
        assert.ok(error instanceof SearchError, `not a SearchError: ${error}`);
        assert.ok(error.message.startsWith(`Invalid regular expression '${c.pattern}'`), error.message);
        assert.ok(error.message.endsWith("untick 'regex' to search for the text as typed."), error.message);
        return true;
      });
      return;
    }
    const mask = search();
    const got = names.filter((_, i) => mask[i] === 1);
    // A known difference: the port answers otherwise today (js_matches), and says why.
    assert.deepEqual(got, c.known_difference ? c.js_matches : c.matches);
  });
}

test("every case matches some names and not all, per kind, or is an error", () => {
  const counts = { plain: new Set(), glob: new Set(), regex: new Set() };
  for (const c of table.cases) {
    if (c.error) continue;
    const kind = c.regex ? "regex" : /[*?]/.test(c.pattern) ? "glob" : "plain";
    counts[kind].add(c.matches.length);
  }
  for (const [kind, seen] of Object.entries(counts)) assert.ok(seen.size >= 4, `${kind}: ${[...seen]}`);
});

// Issue 31: globs of several stars on one 10,000-character name answered after minutes (a
// backtracking RegExp); tests/rendering/test_search_cases.py runs this file under a timeout.
test("globs of several stars match a long name in linear time", () => {
  const name = "a/".repeat(5000);
  const globs = { "*/*/*/MatMul": 0, "*/*/*/a*/": 1, "*a/?/*/*/": 1, "*/*/*/b*/": 0 };
  for (const [glob, expected] of Object.entries(globs)) {
    assert.equal(matchNames([name], [name], glob, false, false)[0], expected, glob);
  }
});

// search.match_source's port, on the same cases (tests/search_cases.json's source_cases).
const { matchSource } = loadScript("search.js", ["matchSource"]);
const sourceValues = [];
const sourceCodes = table.source_paths.map((path) => {
  if (path === null) return -1;  // not recorded
  if (!sourceValues.includes(path)) sourceValues.push(path);
  return sourceValues.indexOf(path);
});
for (const c of table.source_cases) {
  test(`source ${JSON.stringify(c.text)} case=${c.case}`, () => {
    const mask = matchSource(sourceValues, sourceCodes, c.text, c.case);
    assert.deepEqual([...mask.keys()].filter((i) => mask[i] === 1), c.matches);
  });
}
