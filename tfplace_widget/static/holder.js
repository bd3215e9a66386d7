// plotly.min.js is a UMD file that also sets window.Plotly: given a `module` it exports there,
// and the wrapper puts back whatever window.Plotly was (another plotly.js on the page stays).
const BEFORE = "const module = { exports: {} };\n" +
  "const tfplacePlotlyBefore = Object.getOwnPropertyDescriptor(globalThis, 'Plotly');\n";
const AFTER = "\n;if (tfplacePlotlyBefore) Object.defineProperty(globalThis, 'Plotly', " +
  "tfplacePlotlyBefore); else delete globalThis.Plotly;\nexport default module.exports;\n";

async function importBundle(gzipped) {
  if (typeof DecompressionStream === "undefined") {
    throw new Error("this browser has no DecompressionStream (Chrome 80, Firefox 113, Safari 16.4)");
  }
  const stream = new Blob([gzipped]).stream().pipeThrough(new DecompressionStream("gzip"));
  const code = await new Response(stream).blob();
  const url = URL.createObjectURL(new Blob([BEFORE, code, AFTER], { type: "text/javascript" }));
  try {
    const plotly = (await import(url)).default;
    if (typeof plotly?.react !== "function") throw new Error("the file did not export plotly.js");
    return plotly;
  } finally {
    URL.revokeObjectURL(url);
  }
}

export default {
  initialize({ model }) {
    const digest = model.get("digest");
    const entry = bundleEntry(digest);
    if (entry.loading) return;  // this page has (or is importing) this bundle already
    entry.loading = true;
    importBundle(model.get("bundle_gz")).then(entry.resolve, (error) => {
      // Forget the failed entry: a new holder (re-run after a kernel restart) may try again.
      const bundles = globalThis[$REGISTRY];
      if (bundles.get(digest) === entry) bundles.delete(digest);
      entry.reject(new Error(`tfplace_widget: could not load plotly.js: ${error}`));
    });
  },
};
