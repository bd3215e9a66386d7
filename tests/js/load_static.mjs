// Loads a script of tfplace_widget/_static/ as the HTML report runs it: the file's text inside a
// strict function body (the report wraps its scripts in one async function), nothing exported.
import { readFileSync } from "node:fs";

export const STATIC = new URL("../../tfplace_widget/_static/", import.meta.url);

// The bindings `names` that the script `file` declares, e.g. loadScript("search.js", ["matchNames"]).
export function loadScript(file, names) {
  const code = readFileSync(new URL(file, STATIC), "utf8");
  return new Function(`"use strict";\n${code}\nreturn { ${names.join(", ")} };`)();
}
