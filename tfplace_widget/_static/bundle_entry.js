// How long after the holder's offer a frame no timeline has asked yet imports plotly.js anyway:
// past the 2 s anywidget gives each model of a restoring page to load its module (see
// bundleEntry), and well within the seconds a user takes to run the cell after %load_ext.
const PRELOAD_AFTER_MS = 3000;

// plotly.min.js is a UMD file that also sets window.Plotly: given a `module` it exports there,
// and the wrapper puts back whatever window.Plotly was (another plotly.js on the page stays).
const BEFORE = "const module = { exports: {} };\n" +
  "const tfplacePlotlyBefore = Object.getOwnPropertyDescriptor(globalThis, 'Plotly');\n";
const AFTER = "\n;if (tfplacePlotlyBefore) Object.defineProperty(globalThis, 'Plotly', " +
  "tfplacePlotlyBefore); else delete globalThis.Plotly;\nexport default module.exports;\n";

// gzipped plotly.min.js (an ArrayBuffer or a view of one) -> the plotly.js module.
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

// The registry's entry for `digest` in this frame (globalThis is the frame's own): a promise of
// plotly.js. The holder's initialize, or a timeline given the bundle by its kernel, offers the
// gzipped file with offer(); the import starts once a timeline of this frame wants it (want()),
// a task later, or once the page has been quiet PRELOAD_AFTER_MS after the holder's offer
// (preload()). Not at the holder's initialize itself: evaluating plotly.js holds the page's main
// thread for about a second (several under load), and anywidget gives every model 2 s to load
// its module, after which the model drops its kernel's messages; a page restoring many widgets
// at once (a reload) would lose some. `loading`: an import has started here, so nobody imports
// it a second time. `requested`: a timeline of this frame has asked its kernel (one request
// serves them all).
function bundleEntry(digest) {
  const bundles = (globalThis[$REGISTRY] ??= new Map());
  let entry = bundles.get(digest);
  if (entry === undefined) {
    let resolve, reject, wanted = false;
    const promise = new Promise((res, rej) => { resolve = res; reject = rej; });
    promise.catch(() => {});  // a failed load is reported by the timelines that wait on it
    const start = () => {
      if (!wanted || entry.loading || entry.offered === null) return;
      const gzipped = entry.offered;
      entry.loading = true;
      entry.offered = null;
      setTimeout(() => importBundle(gzipped).then(resolve, (error) => {
        // Forget the failed entry: a new holder (re-run after a kernel restart) may try again.
        if (bundles.get(digest) === entry) bundles.delete(digest);
        reject(new Error(`tfplace_widget: could not load plotly.js: ${error}`));
      }), 0);
    };
    entry = {
      promise, loading: false, requested: false,
      offered: null,  // the gzipped bundle, until its import starts
      // Keep `gzipped` to import when wanted, unless this frame has one (or is importing it).
      offer(gzipped) {
        if (entry.loading || entry.offered !== null) return false;
        entry.offered = gzipped;
        start();
        return true;
      },
      // A timeline needs plotly.js: import what was offered, now or when it comes.
      want() {
        wanted = true;
        start();
        return promise;
      },
      // The holder's offer: import it once the page has been quiet a while (PRELOAD_AFTER_MS,
      // then an idle moment), so that the first timeline drawn later finds plotly.js evaluated
      // instead of evaluating it (about 0.8 s, more under load) while its cell's output waits.
      // A timeline that wants it sooner starts the import at once, as before.
      preload() {
        setTimeout(() => {
          const go = () => { wanted = true; start(); };
          const idle = globalThis.requestIdleCallback;  // not in Safari: at once there
          if (typeof idle === "function") idle.call(globalThis, go, { timeout: PRELOAD_AFTER_MS });
          else go();
        }, PRELOAD_AFTER_MS);
      },
    };
    bundles.set(digest, entry);
  }
  return entry;
}
