// The holder has no view: its initialize offers the bundle to this frame's registry entry (which
// imports it when a timeline wants it, see bundleEntry) and returns at once; a frame that has
// (or is importing) this bundle ignores the offer.
export default {
  initialize({ model }) {
    bundleEntry(model.get("digest")).offer(model.get("bundle_gz"));
  },
};
