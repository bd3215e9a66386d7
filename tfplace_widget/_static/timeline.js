const DIGEST = $DIGEST;
const WAIT_MS = $WAIT_MS;
const TYPED = { f4: Float32Array, f8: Float64Array, i4: Int32Array };
// No "Edit in Chart Studio" button: plotly.js shows it by default, and it would send the
// figure to plotly's cloud (nothing is fetched or sent from the page).
const CONFIG = {
  displaylogo: false, responsive: false, showSendToCloud: false, showEditInChartStudio: false,
};
// What the timeline is to a screen reader and the keyboard: the op table is its keyboard path.
const TIMELINE_LABEL = "Timeline of the ops on each device. From the keyboard, pick an op in the "
  + "op table (Tab to its rows, Up and Down, Enter): its bar is ringed here.";

// Plotly's mode-bar buttons (zoom, pan, ...) stay for the mouse but leave the tab order: ten
// unlabelled stops before the table. Plotly remakes them on redraws: called after each one.
function untab(plot) {
  for (const button of plot.querySelectorAll(".modebar-btn")) button.tabIndex = -1;
}

// How long a timeline waits for the holder's bundle to reach its frame before it asks its own
// kernel for it. Where the holder reaches the frame (JupyterLab, Notebook 7), its comm opens
// before the timeline's, so its bundle is there when the timeline renders; 2 s is long past
// that, and short next to the 60 s a frame without it (Colab gives each output a frame of its
// own) used to wait. A needless request costs one more 1.5 MB message, no second import.
const ASK_KERNEL_MS = 2000;

// plotly.js: from the registry's entry of this frame, offered by the holder's initialize or, when
// nothing was offered here after ASK_KERNEL_MS, by this timeline's kernel on request
// ({event: "need_plotly"}, answered with {event: "plotly", digest} and the gzipped bundle).
function plotlyJs(model) {
  const entry = bundleEntry(DIGEST);
  let timer, asking, asked = false;
  const reply = (content, buffers) => {
    if (content?.event !== "plotly" || content.digest !== DIGEST) return;
    model.off("msg:custom", reply);
    entry.offer(buffers?.[0] ?? new Uint8Array(0));  // a no-op if the holder's came first
  };
  const ask = () => {
    // Offered, imported or on its way: wait for it.
    if (entry.offered !== null || entry.loading || entry.requested) return;
    entry.requested = asked = true;
    model.on("msg:custom", reply);
    try {
      model.send({ event: "need_plotly" });
    } catch (error) {  // no kernel to ask (a notebook opened from its saved state): wait on
      console.warn("tfplace_widget: could not ask the kernel for plotly.js", error);
    }
  };
  const late = new Promise((_, reject) => {
    asking = setTimeout(ask, ASK_KERNEL_MS);
    timer = setTimeout(() => reject(new Error(
      `tfplace_widget: plotly.js did not arrive within ${WAIT_MS / 1000} s. It comes once per ` +
      "kernel from a hidden PlotlyBundle widget, and a timeline that does not find it in its " +
      `frame after ${ASK_KERNEL_MS / 1000} s asks its kernel for it; neither answered (no ` +
      "kernel running, or a frontend that does not pass widget messages on): re-run the cell, " +
      "and look for errors in the browser console.")), WAIT_MS);
  });
  return Promise.race([entry.want(), late]).finally(() => {
    clearTimeout(timer);
    clearTimeout(asking);
    model.off("msg:custom", reply);
    // Unanswered: a later timeline of this frame (a re-run, a restarted kernel) may ask again.
    if (asked && !entry.loading) entry.requested = false;
  });
}

// {dtype, bdata} (bdata: the DataView ipywidgets makes of a binary buffer) -> a typed array.
function decode(value) {
  if (Array.isArray(value)) return value.map(decode);
  if (value === null || typeof value !== "object") return value;
  if (value.dtype in TYPED && value.bdata instanceof DataView) {
    const view = value.bdata;  // copied: a view into a message need not be aligned
    const bytes = view.buffer.slice(view.byteOffset, view.byteOffset + view.byteLength);
    return new TYPED[value.dtype](bytes);
  }
  const out = {};
  for (const [key, item] of Object.entries(value)) out[key] = decode(item);
  return out;
}

async function render({ model, el }) {
  el.classList.add("tfplace-timeline");
  el.setAttribute("role", "figure");
  el.setAttribute("aria-label", TIMELINE_LABEL);
  el.title = "Pick an op: click its bar, or Enter on its row in the op table";
  const plot = document.createElement("div");
  el.appendChild(plot);
  let Plotly;
  try {
    Plotly = await plotlyJs(model);
  } catch (error) {
    const message = document.createElement("pre");
    message.className = "tfplace-timeline-error";
    message.textContent = String(error?.message ?? error);
    el.replaceChildren(message);
    console.error(error);
    return;
  }
  let data = [], layout = {};
  function takeFigure() {
    const figure = model.get("figure") ?? {};
    data = decode(figure.data ?? []);
    layout = decode(figure.layout ?? {});
  }
  function draw() {
    const overlays = decode(model.get("overlays") ?? {});
    const drawn = data.map((trace, i) => (i in overlays ? { ...trace, ...overlays[i] } : trace));
    return Plotly.react(plot, drawn, layout, CONFIG).then(() => untab(plot));
  }
  const redraw = () => { takeFigure(); draw(); };
  takeFigure();
  await draw();
  plot.on("plotly_afterplot", () => untab(plot));
  plot.on("plotly_click", (event) => {
    const point = event?.points?.[0];
    if (point) model.send({ event: "click", curve: point.curveNumber, point: point.pointNumber });
  });
  model.on("change:figure", redraw);
  model.on("change:overlays", draw);
  // JupyterLab resizes the output area without a window resize: follow the element's width.
  let width = el.clientWidth;
  const observer = new ResizeObserver(() => {
    if (el.isConnected && el.clientWidth && el.clientWidth !== width) {
      width = el.clientWidth;
      Plotly.Plots.resize(plot);
    }
  });
  observer.observe(el);
  return () => {
    model.off("change:figure", redraw);
    model.off("change:overlays", draw);
    observer.disconnect();
    Plotly.purge(plot);
  };
}

export default { render };
