class SearchError extends Error {}

function escapeRegExp(text) {
  return text.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
}

// A Python ``re`` pattern as a JavaScript RegExp source and flags: the spellings JavaScript
// lacks are rewritten ((?P<name>, (?P=name), \A, \Z, \a, {,n}, (?#...), leading (?imsx)),
// and an escape Python rejects (\q) is rejected here too.
function translatePattern(text) {
  let flags = "";
  let i = 0;
  const lead = /^\(\?([aiLmsux]+)\)/.exec(text);
  if (lead) {
    for (const flag of lead[1]) {
      if (flag === "i" || flag === "m" || flag === "s") flags += flag;
      else if (flag !== "a" && flag !== "u") {
        throw new SearchError(`the inline flag (?${flag}) cannot be used in the report`);
      }
    }
    i = lead[0].length;
  }
  let out = "";
  let inClass = false;
  while (i < text.length) {
    const ch = text[i];
    if (ch === "\\") {
      const next = text[i + 1];
      if (next === undefined) throw new SearchError("bad escape (end of pattern)");
      if (/[A-Za-z]/.test(next)) {
        if (next === "A" && !inClass) out += "^";
        else if (next === "Z" && !inClass) out += "$";
        else if (next === "a") out += "\\x07";
        else if ("bBdDfnrsStvwWxu".includes(next)) out += "\\" + next;
        else throw new SearchError(`bad escape \\${next} at position ${i}`);
      } else {
        out += "\\" + next;
      }
      i += 2;
      continue;
    }
    if (inClass) {
      if (ch === "]") inClass = false;
      out += ch;
      i += 1;
      continue;
    }
    if (ch === "[") {
      inClass = true;
      out += ch;
      i += 1;
      if (text[i] === "^") { out += "^"; i += 1; }
      if (text[i] === "]") { out += "\\]"; i += 1; }  // Python: a leading ] is literal
      continue;
    }
    if (text.startsWith("(?P<", i)) { out += "(?<"; i += 4; continue; }
    if (text.startsWith("(?P=", i)) {
      const end = text.indexOf(")", i);
      if (end < 0) throw new SearchError("missing ), unterminated name");
      out += "\\k<" + text.slice(i + 4, end) + ">";
      i = end + 1;
      continue;
    }
    if (text.startsWith("(?#", i)) {
      const end = text.indexOf(")", i);
      if (end < 0) throw new SearchError("missing ), unterminated comment");
      i = end + 1;
      continue;
    }
    const empty = /^\{,(\d+)\}/.exec(text.slice(i));
    if (empty) { out += `{0,${empty[1]}}`; i += empty[0].length; continue; }
    out += ch;
    i += 1;
  }
  return { source: out, flags };
}

// search.compile_glob: the glob as a RegExp over a whole name: * any run of characters, ? one
// character (a code point, the u flag; a newline too, the s flag), the rest itself ([ and ]
// included). Case-sensitive: without "match case" the text and the names are lower-cased.
// Linear in the name: each run between two stars is matched where it first occurs, by
// (?:(?!run).)*run, which can neither pass that place nor give it up (.* per star backtracks).
function compileGlob(text) {
  const runs = text.split("*").map(
    (part) => part.split("?").map(escapeRegExp).join("."));
  const last = runs.pop();
  if (runs.length === 0) return new RegExp(`^(?:${last})$`, "su");
  const middle = runs.slice(1).filter((run) => run !== "");
  const body = runs[0] + middle.map((run) => `(?:(?!${run}).)*${run}`).join("") + `.*${last}`;
  return new RegExp(`^(?:${body})$`, "su");
}

// search.compile_query: a RegExp, or null when a plain substring test will do (a glob's,
// without caseSensitive, is for the lower-cased names).
function compileQuery(text, regex, caseSensitive) {
  if (regex) {
    try {
      const { source, flags } = translatePattern(text);
      const all = new Set(flags + (caseSensitive ? "" : "i"));
      return new RegExp(source, [...all].join(""));
    } catch (error) {
      const why = String(error && error.message ? error.message : error);
      throw new SearchError(
        `Invalid regular expression '${text}': ${why}. Fix it, or untick 'regex' to ` +
        "search for the text as typed.");
    }
  }
  if (text.includes("*") || text.includes("?")) {
    return compileGlob(caseSensitive ? text : text.toLowerCase());
  }
  return null;
}

// search.match_names: 1 where names[i] matches (all 1 for an empty text). ``lowered`` is the
// names lower-cased once (the case-insensitive substring test).
function matchNames(names, lowered, text, regex, caseSensitive) {
  const mask = new Uint8Array(names.length);
  if (!text) { mask.fill(1); return mask; }
  const pattern = compileQuery(text, regex, caseSensitive);
  if (pattern === null) {
    if (caseSensitive) {
      for (let i = 0; i < names.length; i++) mask[i] = names[i].includes(text) ? 1 : 0;
    } else {
      const needle = text.toLowerCase();
      for (let i = 0; i < names.length; i++) mask[i] = lowered[i].includes(needle) ? 1 : 0;
    }
    return mask;
  }
  // A glob without caseSensitive matches the lower-cased names, as the substring test does.
  const haystack = regex || caseSensitive ? names : lowered;
  for (let i = 0; i < names.length; i++) mask[i] = pattern.test(haystack[i]) ? 1 : 0;
  return mask;
}

// search.match_source: 1 where the op was made at the line ``text`` names (``train.py:42``, a
// path's tail or the whole path), from the coded ``source_path`` column (``values``, ``codes``,
// -1 where not recorded); all 0 for any other text. The same line only: not train.py:420.
const SOURCE_QUERY = /^[^\s*?:]+\.[A-Za-z0-9_]+:\d+$/;
function matchSource(values, codes, text, caseSensitive) {
  const mask = new Uint8Array(codes.length);
  if (!SOURCE_QUERY.test(text)) return mask;
  const wanted = caseSensitive ? text : text.toLowerCase();
  const tail = "/" + wanted.replace(/^\/+/, "");
  const hits = values.map((value) => {
    const path = caseSensitive ? value : value.toLowerCase();
    return path === wanted || path.endsWith(tail);
  });
  for (let i = 0; i < codes.length; i++) mask[i] = codes[i] >= 0 && hits[codes[i]] ? 1 : 0;
  return mask;
}
